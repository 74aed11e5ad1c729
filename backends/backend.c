/* felab backend registry: the list of backends compiled in, opened lazily by name, and the
 * session defaults. Helpers shared by every backend live here too. */
#include "backends/backend.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/error.h"

extern const fe_backend_ops fe_backend_cpu_ops;
extern const fe_backend_ops fe_backend_opencl_ops;
extern const fe_backend_ops fe_backend_cuda_ops;

/* The one line per backend. */
static const fe_backend_ops *const registry[] = {
    &fe_backend_cpu_ops,
    &fe_backend_opencl_ops,
    &fe_backend_cuda_ops,
};
#define NBACKENDS ((int)(sizeof registry / sizeof registry[0]))

static fe_backend *opened[NBACKENDS];
static char open_failure[NBACKENDS][512]; /* why a backend could not be opened */
static char default_backend[16] = "";
static fe_precision default_precision = FE_DOUBLE;

int fe_backend_count(void) { return NBACKENDS; }
const char *fe_backend_name(int i) { return (i >= 0 && i < NBACKENDS) ? registry[i]->name : NULL; }

static int backend_index(const char *name)
{
  for (int i = 0; i < NBACKENDS; i++)
    if (!strcmp(registry[i]->name, name)) return i;
  return -1;
}

/* Say which names exist, for error messages. */
static void backend_names(char *buf, size_t n)
{
  buf[0] = '\0';
  for (int i = 0; i < NBACKENDS; i++) {
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", i ? ", " : "", registry[i]->name);
  }
}

/* The open backend whose state is impl (alloc and release know only that). */
static fe_backend *owner(void *impl)
{
  for (int i = 0; i < NBACKENDS; i++)
    if (opened[i] && opened[i]->impl == impl) return opened[i];
  return NULL;
}

static int counted_alloc(void *impl, size_t bytes, fe_buffer *buf)
{
  fe_backend *be = owner(impl);
  int i = be ? backend_index(be->name) : -1;
  FE_ASSERT(i >= 0, FE_ERR_INTERNAL, "an allocation on a backend that is not open");
  FE_CHECK(registry[i]->alloc(impl, bytes, buf));
  size_t now = __atomic_add_fetch(&be->mem_now, buf->bytes, __ATOMIC_RELAXED);
  size_t peak = __atomic_load_n(&be->mem_peak, __ATOMIC_RELAXED);
  while (now > peak &&
         !__atomic_compare_exchange_n(&be->mem_peak, &peak, now, 1, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
  return 0;
}

static void counted_release(void *impl, fe_buffer *buf)
{
  fe_backend *be = owner(impl);
  int i = be ? backend_index(be->name) : -1;
  if (i < 0) return;
  size_t bytes = buf->bytes;
  int had = buf->ptr != NULL;
  registry[i]->release(impl, buf);
  if (had) __atomic_sub_fetch(&be->mem_now, bytes, __ATOMIC_RELAXED);
}

static int counted_write(void *impl, fe_buffer *dst, size_t offset, size_t bytes, const void *host)
{
  fe_backend *be = owner(impl);
  int i = be ? backend_index(be->name) : -1;
  FE_ASSERT(i >= 0, FE_ERR_INTERNAL, "a write to a backend that is not open");
  FE_CHECK(registry[i]->write(impl, dst, offset, bytes, host));
  __atomic_add_fetch(&be->written_bytes, bytes, __ATOMIC_RELAXED);
  __atomic_add_fetch(&be->writes, 1, __ATOMIC_RELAXED);
  return 0;
}

static int counted_read(void *impl, const fe_buffer *src, size_t offset, size_t bytes, void *host)
{
  fe_backend *be = owner(impl);
  int i = be ? backend_index(be->name) : -1;
  FE_ASSERT(i >= 0, FE_ERR_INTERNAL, "a read from a backend that is not open");
  FE_CHECK(registry[i]->read(impl, src, offset, bytes, host));
  __atomic_add_fetch(&be->read_bytes, bytes, __ATOMIC_RELAXED);
  __atomic_add_fetch(&be->reads, 1, __ATOMIC_RELAXED);
  return 0;
}

int fe_backend_get(const char *name, fe_backend **be)
{
  if (!name || !*name) name = fe_backend_default();
  int i = backend_index(name);
  if (i < 0) {
    char names[128];
    backend_names(names, sizeof names);
    FE_ERROR(FE_ERR_ARG, "unknown backend '%s' (known: %s)", name, names);
  }
  if (opened[i]) {
    *be = opened[i];
    return 0;
  }
  if (open_failure[i][0])
    FE_ERROR(FE_ERR_UNAVAILABLE, "backend '%s' is not available: %s", name, open_failure[i]);
  fe_backend *b;
  FE_CALLOC(b, 1, "backend");
  b->ops = registry[i];
  snprintf(b->name, sizeof b->name, "%s", name);
  if (b->ops->open(0, &b->impl)) {
    snprintf(open_failure[i], sizeof open_failure[i], "%s", fe_error_message());
    free(b);
    FE_ERROR(FE_ERR_UNAVAILABLE, "backend '%s' is not available: %s", name, open_failure[i]);
  }
  if (b->ops->query(b->impl, &b->info)) {
    b->ops->close(b->impl);
    free(b);
    return fe_error_push(FE_ERR_BACKEND, __FILE__, __LINE__, __func__);
  }
  b->counted = *b->ops;
  b->counted.alloc = counted_alloc;
  b->counted.release = counted_release;
  b->counted.write = counted_write;
  b->counted.read = counted_read;
  b->ops = &b->counted;
  opened[i] = b;
  *be = b;
  return 0;
}

fe_backend *fe_backend_opened(int i) { return i >= 0 && i < NBACKENDS ? opened[i] : NULL; }

void fe_backend_memory(fe_backend *be, size_t *now, size_t *peak, int reset)
{
  size_t n = __atomic_load_n(&be->mem_now, __ATOMIC_RELAXED);
  if (reset) __atomic_store_n(&be->mem_peak, n, __ATOMIC_RELAXED);
  if (now) *now = n;
  if (peak) *peak = __atomic_load_n(&be->mem_peak, __ATOMIC_RELAXED);
}

void fe_backend_transfers(fe_backend *be, size_t *read_bytes, size_t *written_bytes, size_t *reads,
                          size_t *writes)
{
  *read_bytes = __atomic_load_n(&be->read_bytes, __ATOMIC_RELAXED);
  *written_bytes = __atomic_load_n(&be->written_bytes, __ATOMIC_RELAXED);
  *reads = __atomic_load_n(&be->reads, __ATOMIC_RELAXED);
  *writes = __atomic_load_n(&be->writes, __ATOMIC_RELAXED);
}

int fe_backend_available(int i, char *why, size_t nwhy)
{
  fe_backend *be;
  if (i < 0 || i >= NBACKENDS) return 0;
  if (fe_backend_get(registry[i]->name, &be)) {
    snprintf(why, nwhy, "%s", open_failure[i][0] ? open_failure[i] : fe_error_message());
    fe_error_clear();
    return 0;
  }
  snprintf(why, nwhy, "%s", be->info.name);
  return 1;
}

void fe_backend_shutdown(void)
{
  for (int i = 0; i < NBACKENDS; i++) {
    if (!opened[i]) continue;
    opened[i]->ops->close(opened[i]->impl);
    free(opened[i]);
    opened[i] = NULL;
  }
}

const char *fe_backend_default(void)
{
  if (!default_backend[0]) {
    const char *env = getenv("FELAB_BACKEND");
    snprintf(default_backend, sizeof default_backend, "%s",
             env && backend_index(env) >= 0 ? env : "cpu");
  }
  return default_backend;
}

int fe_backend_set_default(const char *name)
{
  if (backend_index(name) < 0) {
    char names[128];
    backend_names(names, sizeof names);
    FE_ERROR(FE_ERR_ARG, "unknown backend '%s' (known: %s)", name, names);
  }
  snprintf(default_backend, sizeof default_backend, "%s", name);
  return 0;
}

const char *fe_backend_best(void)
{
  fe_backend *be;
  if (!fe_backend_get("cuda", &be)) return "cuda";
  if (!fe_backend_get("opencl", &be) && be->info.is_gpu) return "opencl";
  fe_error_clear();
  return "cpu";
}

fe_precision fe_precision_default(void) { return default_precision; }
void fe_precision_set_default(fe_precision p) { default_precision = p; }

int fe_precision_parse(const char *s, fe_precision *p)
{
  if (!strcmp(s, "double") || !strcmp(s, "fp64")) *p = FE_DOUBLE;
  else if (!strcmp(s, "single") || !strcmp(s, "float") || !strcmp(s, "fp32")) *p = FE_FLOAT;
  else FE_ERROR(FE_ERR_ARG, "unknown precision '%s' (use \"double\" or \"single\")", s);
  return 0;
}

const char *fe_precision_name(fe_precision p) { return p == FE_FLOAT ? "single" : "double"; }
size_t fe_precision_size(fe_precision p) { return p == FE_FLOAT ? sizeof(float) : sizeof(double); }

int fe_vectors_check(const char *op, const char *names, const fe_buffer *const *v, size_t n,
                     fe_precision prec)
{
  size_t need = n * fe_precision_size(prec);
  for (int i = 0; names[i]; i++) {
    FE_ASSERT(v[i] && (v[i]->ptr || !n), FE_ERR_ARG, "%s: vector %c is not allocated", op,
              names[i]);
    FE_ASSERT(v[i]->bytes >= need, FE_ERR_ARG, "%s: vector %c holds %zu bytes, %zu %s values "
              "need %zu", op, names[i], v[i]->bytes, n, fe_precision_name(prec), need);
  }
  return 0;
}

unsigned long long fe_hash_string(const char *s, unsigned long long seed)
{
  unsigned long long h = 1469598103934665603ULL ^ seed;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ULL;
  }
  return h;
}

unsigned long long fe_device_hash(const fe_backend *be)
{
  char units[32];
  snprintf(units, sizeof units, "%d units", be->info.compute_units);
  return fe_hash_string(units, fe_hash_string(be->info.name, fe_hash_string(be->name, 0)));
}

/* Seconds of CLOCK_MONOTONIC: immune to changes of the wall-clock time. */
double fe_clock(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* mkdir -p for a path of at most a few levels. */
static int make_dirs(char *path)
{
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0755) && errno != EEXIST) {
      *p = '/';
      return -1;
    }
    *p = '/';
  }
  if (mkdir(path, 0755) && errno != EEXIST) return -1;
  return 0;
}

int fe_cache_dir(const char *sub, char *path, size_t n)
{
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (getenv("FELAB_CACHE")) snprintf(path, n, "%s/%s", getenv("FELAB_CACHE"), sub);
  else if (xdg && *xdg) snprintf(path, n, "%s/felab/%s", xdg, sub);
  else snprintf(path, n, "%s/.cache/felab/%s", home && *home ? home : "/tmp", sub);
  if (make_dirs(path))
    FE_ERROR(FE_ERR_IO, "cannot create the cache directory %s: %s", path, strerror(errno));
  return 0;
}

/* The lock on path, waiting for it (how = LOCK_EX) or not (LOCK_EX | LOCK_NB: FE_CACHE_BUSY
 * while another holds it). */
static int cache_lock(const char *path, int how)
{
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  while (fd >= 0 && flock(fd, how)) { /* a signal: wait again; another failure: no lock */
    int busy = errno == EWOULDBLOCK && (how & LOCK_NB);
    if (errno == EINTR) continue;
    close(fd);
    fd = busy ? FE_CACHE_BUSY : -1;
  }
  return fd;
}

int fe_cache_lock(const char *path)
{
  return cache_lock(path, LOCK_EX);
}

void fe_cache_unlock(int fd)
{
  if (fd >= 0) close(fd); /* closing releases the lock */
}

static int cache_lock_kernel(const char *sub, unsigned long long hash, int how)
{
  char dir[1024], path[1100];
  if (fe_cache_dir(sub, dir, sizeof dir)) {
    fe_error_clear(); /* no cache folder: nothing shared to wait for */
    return -1;
  }
  snprintf(path, sizeof path, "%s/lock.%02d", dir, (int)(hash % FE_CACHE_LOCKS));
  return cache_lock(path, how);
}

int fe_cache_lock_kernel(const char *sub, unsigned long long hash)
{
  return cache_lock_kernel(sub, hash, LOCK_EX);
}

int fe_cache_trylock_kernel(const char *sub, unsigned long long hash)
{
  return cache_lock_kernel(sub, hash, LOCK_EX | LOCK_NB);
}

/* A cache entry that failed to load: remove it so that it is built again, and say so once
 * per process (only when there was a file to remove). Returns 1 if it was removed. */
int fe_cache_drop(const char *path, const char *reason)
{
  static int said;
  if (remove(path)) return 0;
  if (!said) {
    said = 1;
    const char *why = reason && *reason ? reason : "unreadable";
    fprintf(stderr, "felab: dropped a damaged cache entry (%s: %.*s); rebuilding it\n", path,
            (int)strcspn(why, "\n"), why); /* its first line: a compiler log may follow */
  }
  return 1;
}

/* Find "LINE:" numbers after the first ':' that follows a file-ish token, e.g.
 * "/tmp/x.c:57:12: error" or "<source>:57:3: error", or NVRTC's "felab.cu(57): error".
 * Returns 0 if none. */
static int log_line_number(const char *line)
{
  const char *p = strchr(line, ':');
  while (p) {
    if (isdigit((unsigned char)p[1])) {
      char *end;
      long v = strtol(p + 1, &end, 10);
      if (*end == ':' || *end == ',' || *end == ')') return (int)v;
    }
    p = strchr(p + 1, ':');
  }
  for (p = strchr(line, '('); p; p = strchr(p + 1, '(')) {
    if (!isdigit((unsigned char)p[1])) continue;
    char *end;
    long v = strtol(p + 1, &end, 10);
    if (end[0] == ')' && end[1] == ':') return (int)v;
  }
  return 0;
}

int fe_backend_compile_error(const char *backend, const char *source, const char *log)
{
  char msg[3072];
  size_t len = 0;
  int shown = 0, last = -1;
  len += snprintf(msg, sizeof msg, "the generated %s kernel does not compile:", backend);
  const char *l = log ? log : "";
  while (*l && shown < 3 && len + 200 < sizeof msg) {
    const char *eol = strchr(l, '\n');
    size_t ll = eol ? (size_t)(eol - l) : strlen(l);
    char linebuf[512];
    snprintf(linebuf, sizeof linebuf, "%.*s", (int)(ll < 500 ? ll : 500), l);
    int no = strstr(linebuf, "error") ? log_line_number(linebuf) : 0;
    if (no > 0 && no != last) {
      /* quote the source line the compiler points at */
      const char *s = source;
      for (int k = 1; k < no && s; k++) {
        s = strchr(s, '\n');
        if (s) s++;
      }
      if (s) {
        const char *se = strchr(s, '\n');
        int sl = se ? (int)(se - s) : (int)strlen(s);
        len += snprintf(msg + len, sizeof msg - len, "\n  %s\n  generated line %d: %.*s",
                        linebuf, no, sl > 300 ? 300 : sl, s);
        shown++;
        last = no;
      }
    }
    l = eol ? eol + 1 : l + ll;
  }
  if (!shown && len + 100 < sizeof msg)
    len += (size_t)snprintf(msg + len, sizeof msg - len, "\n%.2000s", log ? log : "(no compiler log)");
  if (log && strstr(log, "too much global constant data") && len < sizeof msg)
    snprintf(msg + len, sizeof msg - len,
             "\n  the kernel's tables (__constant arrays) exceed the device's constant memory "
             "(64 KB on NVIDIA's OpenCL): dense tables of a high order or of an auxiliary field; "
             "the cuda and cpu backends have no such limit");
  return fe_error_set(FE_ERR_COMPILE, __FILE__, __LINE__, __func__, "%s", msg);
}

#ifndef FE_HAVE_OPENCL
/* Built without OpenCL headers: the backend still exists and says why it cannot run. */
static int opencl_missing(int device, void **impl)
{
  (void)device;
  *impl = NULL;
  FE_ERROR(FE_ERR_UNAVAILABLE,
           "felab was built without OpenCL (install ocl-icd-opencl-dev and rebuild)");
}
const fe_backend_ops fe_backend_opencl_ops = {.name = "opencl", .open = opencl_missing};
#endif
