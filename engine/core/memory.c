/* felab host memory: what the process may still take (MemAvailable, the memory cgroup, the
 * resource limits, FELAB_MEMORY_LIMIT), and the check before a large allocation
 * (engine/core/memory.h says why and what bounds it). */
#include "engine/core/memory.h"

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "backends/backend.h"
#include "engine/core/error.h"

/* The fraction of what is available that one request may take. */
#define FE_MEMORY_SHARE 0.9

/* Up to n - 1 bytes of the file at path into buf, NUL-terminated; its length, or -1. */
static long read_text(const char *path, char *buf, size_t n)
{
  int fd = open(path, O_RDONLY | O_CLOEXEC); /* not stdio: a check reads several such files */
  if (fd < 0) return -1;
  size_t len = 0;
  for (ssize_t got = 1; got > 0 && len < n - 1; len += (size_t)got)
    if ((got = read(fd, buf + len, n - 1 - len)) < 0) got = 0;
  close(fd);
  buf[len] = '\0';
  return (long)len;
}

/* The unsigned number at the start of s (after blanks) into *v: 0, or -1 (none). */
static int read_number(const char *s, unsigned long long *v)
{
  while (*s == ' ' || *s == '\t') s++;
  if (*s < '0' || *s > '9') return -1;
  unsigned long long x = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    unsigned d = (unsigned)(*s - '0');
    if (x > (ULLONG_MAX - d) / 10) return -1;
    x = 10 * x + d;
  }
  *v = x;
  return 0;
}

/* The number after "key" at the start of a line of text (key includes its separator). */
static int find_field(const char *text, const char *key, unsigned long long *v)
{
  const size_t k = strlen(key);
  for (const char *line = text; *line;) {
    if (!strncmp(line, key, k)) return read_number(line + k, v);
    const char *end = strchr(line, '\n');
    if (!end) break;
    line = end + 1;
  }
  return -1;
}

int fe_memory_parse_meminfo(const char *text, size_t *bytes)
{
  unsigned long long kb;
  if (find_field(text, "MemAvailable:", &kb) || kb > SIZE_MAX / 1024) return -1;
  *bytes = (size_t)kb * 1024;
  return 0;
}

int fe_memory_parse_size(const char *text, size_t *bytes)
{
  const char *s = text;
  while (*s == ' ') s++;
  double x = 0, scale = 1;
  int digits = 0;
  for (; *s >= '0' && *s <= '9'; s++, digits++) x = 10 * x + (*s - '0');
  if (*s == '.')
    for (s++; *s >= '0' && *s <= '9'; s++, digits++) x += (*s - '0') * (scale /= 10);
  if (!digits) return -1;
  while (*s == ' ') s++;
  static const char units[] = "KMGT";
  const char *u = *s ? strchr(units, *s & ~0x20) : NULL; /* upper case */
  if (u) {
    for (const char *p = units; p <= u; p++) x *= 1024;
    s++;
    if (*s == 'i') s++;
  }
  if (*s == 'B' || *s == 'b') s++;
  while (*s == ' ') s++;
  if (*s || !(x < 0x1p63)) return -1;
  *bytes = (size_t)x;
  return 0;
}

void fe_memory_format(size_t bytes, char *buf, size_t n)
{
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, n, "%zu B", bytes);
    return;
  }
  double x = (double)bytes / 1024;
  int u = 0;
  while (x >= 1024 && u < 5) x /= 1024, u++;
  snprintf(buf, n, "%.1f %s", x, units[u]);
}

/* One cgroup's limit less its usage (file pages that can be dropped count free) into *avail:
 * v2's memory.max, memory.current and memory.stat's inactive_file in dir, or v1's
 * memory.limit_in_bytes, memory.usage_in_bytes and total_inactive_file. 0, or -1 (no limit
 * there). */
static int cgroup_level(const char *dir, int v1, size_t *avail)
{
  char path[4200], text[8192];
  unsigned long long limit, usage, inactive = 0;
  snprintf(path, sizeof path, "%s/%s", dir, v1 ? "memory.limit_in_bytes" : "memory.max");
  if (read_text(path, text, sizeof text) < 0 || read_number(text, &limit)) return -1; /* "max" */
  if (limit >= (1ULL << 60)) return -1; /* v1's "unlimited" is a page-rounded 2^63 */
  snprintf(path, sizeof path, "%s/%s", dir, v1 ? "memory.usage_in_bytes" : "memory.current");
  if (read_text(path, text, sizeof text) < 0 || read_number(text, &usage)) usage = 0;
  snprintf(path, sizeof path, "%s/memory.stat", dir);
  if (read_text(path, text, sizeof text) >= 0)
    (void)find_field(text, v1 ? "total_inactive_file " : "inactive_file ", &inactive);
  usage = usage > inactive ? usage - inactive : 0;
  *avail = limit > usage ? (size_t)(limit - usage) : 0;
  return 0;
}

/* Whether the comma-separated controllers [from, to) include "memory". */
static int lists_memory(const char *from, const char *to)
{
  for (const char *t = from; t < to;) {
    const char *comma = memchr(t, ',', (size_t)(to - t)), *end = comma ? comma : to;
    if (end - t == 6 && !strncmp(t, "memory", 6)) return 1;
    t = end + 1;
  }
  return 0;
}

int fe_memory_cgroup(const char *cgroups, const char *mount, size_t *avail, int *v1)
{
  char text[4096];
  snprintf(text, sizeof text, "%s", cgroups);
  int found = -1;
  for (char *line = text; line && *line;) {
    char *end = strchr(line, '\n'), *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (end) *end = '\0';
    /* "0::/path" (v2), or "N:controllers:/path" with memory among the controllers (v1) */
    const int is_v2 = c1 && c2 == c1 + 1 && !strncmp(line, "0:", 2);
    const int is_v1 = c2 && lists_memory(c1 + 1, c2);
    if ((is_v1 || is_v2) && c2[1] == '/') {
      char dir[4100];
      const char *path = strcmp(c2 + 1, "/") ? c2 + 1 : ""; /* the root: the mount itself */
      const long root = (long)strlen(mount) + (is_v1 ? 7 : 0);
      int n = snprintf(dir, sizeof dir, "%s%s%s", mount, is_v1 ? "/memory" : "", path);
      while (n > 0 && (size_t)n < sizeof dir) { /* this cgroup, then each one above it */
        size_t a;
        if (!cgroup_level(dir, is_v1, &a) && (found < 0 || a < *avail))
          *avail = a, *v1 = is_v1, found = 0;
        char *slash = strrchr(dir, '/');
        if (!slash || slash - dir < root) break;
        *slash = '\0';
        n = (int)(slash - dir);
      }
    }
    line = end ? end + 1 : NULL;
  }
  return found;
}

/* The bytes of this process's pages in memory (/proc/self/statm's resident; 0: unknown). */
static size_t process_resident(void)
{
  char text[256];
  unsigned long long size, resident;
  if (read_text("/proc/self/statm", text, sizeof text) < 0 ||
      sscanf(text, "%llu %llu", &size, &resident) != 2)
    return 0;
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* RLIMIT_AS less the address space mapped, RLIMIT_DATA less the data mapped (/proc/self/statm:
 * size and data, in pages), the tighter one; -1 where neither is set. */
static int rlimit_available(size_t *avail, const char **which)
{
  struct rlimit as, data;
  const int has_as = !getrlimit(RLIMIT_AS, &as) && as.rlim_cur != RLIM_INFINITY;
  const int has_data = !getrlimit(RLIMIT_DATA, &data) && data.rlim_cur != RLIM_INFINITY;
  if (!has_as && !has_data) return -1;
  char text[256];
  unsigned long long size = 0, resident, shared, code, lib, dat = 0;
  if (read_text("/proc/self/statm", text, sizeof text) >= 0)
    (void)sscanf(text, "%llu %llu %llu %llu %llu %llu", &size, &resident, &shared, &code, &lib,
                 &dat);
  const unsigned long long page = (unsigned long long)sysconf(_SC_PAGESIZE);
  size_t a = SIZE_MAX;
  *which = NULL;
  if (has_as) {
    a = as.rlim_cur > size * page ? (size_t)(as.rlim_cur - size * page) : 0;
    *which = "RLIMIT_AS";
  }
  if (has_data) {
    size_t d = data.rlim_cur > dat * page ? (size_t)(data.rlim_cur - dat * page) : 0;
    if (d < a) a = d, *which = "RLIMIT_DATA";
  }
  *avail = a;
  return 0;
}

int fe_memory_available(fe_memory_info *info)
{
  *info = (fe_memory_info){.available = SIZE_MAX, .bound = "no bound known", .meminfo = SIZE_MAX,
                           .cgroup = SIZE_MAX, .rlimit = SIZE_MAX, .env = SIZE_MAX};
  const char *env = getenv("FELAB_MEMORY_LIMIT");
  size_t limit;
  if (env && *env && fe_memory_parse_size(env, &limit))
    FE_ERROR(FE_ERR_ARG, "FELAB_MEMORY_LIMIT = '%s' is not a size: use bytes, or a number with K, "
             "M, G or T (256M, 1.5G)", env);
  if (env && *env) { /* as if the host had that much: less what this process holds now */
    size_t resident = process_resident();
    info->env = limit > resident ? limit - resident : 0;
  }
  char text[4096];
  if (read_text("/proc/meminfo", text, sizeof text) < 0 ||
      fe_memory_parse_meminfo(text, &info->meminfo))
    info->meminfo = SIZE_MAX;
  int v1 = 0;
  if (read_text("/proc/self/cgroup", text, sizeof text) < 0 ||
      fe_memory_cgroup(text, "/sys/fs/cgroup", &info->cgroup, &v1))
    info->cgroup = SIZE_MAX;
  const char *rl = NULL;
  if (rlimit_available(&info->rlimit, &rl)) info->rlimit = SIZE_MAX;
  const struct {
    size_t bytes;
    const char *name;
  } bound[4] = {
      {info->meminfo, "MemAvailable"},
      {info->cgroup, v1 ? "the cgroup's memory.limit_in_bytes" : "the cgroup's memory.max"},
      {info->rlimit, rl},
      {info->env, "FELAB_MEMORY_LIMIT"},
  };
  for (int i = 0; i < 4; i++)
    if (bound[i].bytes < info->available)
      info->available = bound[i].bytes, info->bound = bound[i].name;
  return 0;
}

/* fe_memory_check's work, on a va_list. */
static int host_check(size_t bytes, const char *what, va_list ap)
{
  if (bytes < FE_MEMORY_LEAST) return 0;
  fe_memory_info m;
  FE_CHECK(fe_memory_available(&m));
  if ((double)bytes <= FE_MEMORY_SHARE * (double)m.available) return 0;
  /* the heap's free pages back to the system first (freed memory is kept: with hypre linked
   * malloc neither trims nor maps large blocks apart), then ask again */
  if (malloc_trim(0)) {
    FE_CHECK(fe_memory_available(&m));
    if ((double)bytes <= FE_MEMORY_SHARE * (double)m.available) return 0;
  }
  char thing[512], need[32], have[32];
  vsnprintf(thing, sizeof thing, what, ap);
  fe_memory_format(bytes, need, sizeof need);
  fe_memory_format(m.available, have, sizeof have);
  FE_ERROR(FE_ERR_MEM, "out of host memory: %s needs %s; %s available (%s)%s", thing, need,
           have, m.bound, bytes <= m.available ? ", of which felab leaves a tenth free" : "");
}

int fe_memory_check(size_t bytes, const char *what, ...)
{
  va_list ap;
  va_start(ap, what);
  int rc = host_check(bytes, what, ap);
  va_end(ap);
  return rc;
}

int fe_memory_check_on(const fe_backend *be, size_t bytes, const char *what, ...)
{
  va_list ap;
  va_start(ap, what);
  int rc = 0;
  if (be->ops->host || !be->info.is_gpu) { /* its buffers are host memory */
    rc = host_check(bytes, what, ap);
  } else if (bytes >= FE_MEMORY_LEAST && be->info.global_mem) {
    const size_t held = __atomic_load_n(&be->mem_now, __ATOMIC_RELAXED);
    const size_t free_bytes = be->info.global_mem > held ? be->info.global_mem - held : 0;
    if (bytes > free_bytes) {
      char thing[512], need[32], have[32], all[32], mine[32];
      vsnprintf(thing, sizeof thing, what, ap);
      fe_memory_format(bytes, need, sizeof need);
      fe_memory_format(free_bytes, have, sizeof have);
      fe_memory_format(be->info.global_mem, all, sizeof all);
      fe_memory_format(held, mine, sizeof mine);
      rc = fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                        "out of device memory on %s: %s needs %s; %s available (%s of device "
                        "memory, %s of it held by felab's buffers)",
                        be->info.name, thing, need, have, all, mine);
    }
  }
  va_end(ap);
  return rc;
}
