/* The host memory check (engine/core/memory.c): MemAvailable read from /proc/meminfo's text, sizes
 * as FELAB_MEMORY_LIMIT takes them, the limit bounding what is available, and refusals that
 * name the request, both sizes and the bound; refine, space and mesh.box checked before they
 * allocate; a large populated block marked for huge pages. (Criterion runs each test in a process of its own: setenv stays in it.) */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/mesh/mesh.h"
#include "engine/fem/space.h"

Test(memory, meminfo_gives_mem_available_in_bytes)
{
  const char *text = "MemTotal:       24684084 kB\n"
                     "MemFree:        17360500 kB\n"
                     "MemAvailable:   23684172 kB\n"
                     "Buffers:          123456 kB\n";
  size_t b = 0;
  cr_assert_eq(fe_memory_parse_meminfo(text, &b), 0);
  cr_assert_eq(b, (size_t)23684172 * 1024);
  /* first line, and a line that only starts alike is not it */
  cr_assert_eq(fe_memory_parse_meminfo("MemAvailable: 7 kB\n", &b), 0);
  cr_assert_eq(b, 7 * 1024);
  cr_assert_neq(fe_memory_parse_meminfo("MemTotal: 5 kB\nXMemAvailable: 3 kB\n", &b), 0);
  cr_assert_neq(fe_memory_parse_meminfo("MemAvailable:\n", &b), 0);
  cr_assert_neq(fe_memory_parse_meminfo("", &b), 0);
}

Test(memory, sizes_take_binary_suffixes)
{
  static const struct {
    const char *text;
    size_t bytes;
  } ok[] = {
      {"0", 0},          {"4096", 4096},           {"64k", 64 << 10},  {"256M", 256 << 20},
      {"256MiB", 256 << 20}, {"256 MB", 256 << 20}, {"1.5G", 3u << 29}, {"2g", 2ull << 30},
      {" 1T ", 1ull << 40}, {"0.5K", 512},          {"100b", 100},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    size_t b = 1;
    cr_assert_eq(fe_memory_parse_size(ok[i].text, &b), 0, "'%s' is a size", ok[i].text);
    cr_assert_eq(b, ok[i].bytes, "'%s': %zu, not %zu", ok[i].text, b, ok[i].bytes);
  }
  static const char *const bad[] = {"",    "M",        "abc",         "12X",
                                    "-1G", "1G extra", "99999999999T", "1.5.5G"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t b;
    cr_assert_neq(fe_memory_parse_size(bad[i], &b), 0, "'%s' is not a size", bad[i]);
  }
}

Test(memory, format_names_the_unit)
{
  char buf[32];
  fe_memory_format(512, buf, sizeof buf);
  cr_assert_str_eq(buf, "512 B");
  fe_memory_format((size_t)232 << 20, buf, sizeof buf);
  cr_assert_str_eq(buf, "232.0 MiB");
  fe_memory_format((size_t)(18.4 * (1 << 30)), buf, sizeof buf);
  cr_assert_str_eq(buf, "18.4 GiB");
}

/* A file of text under dir (made as needed). */
static void put(const char *dir, const char *name, const char *text)
{
  char path[512];
  snprintf(path, sizeof path, "mkdir -p '%s'", dir);
  cr_assert_eq(system(path), 0);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  cr_assert(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

Test(memory, cgroups_give_their_tightest_limit_less_usage)
{
  char mount[] = "/tmp/felab-cgroup-XXXXXX", dir[512];
  cr_assert(mkdtemp(mount));
  size_t avail = 0;
  int v1 = -1;
  /* v2: the process's cgroup has no limit ("max"), its parent 1 GiB with 300 MiB used of which
   * 100 MiB are inactive file pages (free to take) */
  snprintf(dir, sizeof dir, "%s/user.slice/app", mount);
  put(dir, "memory.max", "max\n");
  put(dir, "memory.current", "5000\n");
  snprintf(dir, sizeof dir, "%s/user.slice", mount);
  put(dir, "memory.max", "1073741824\n");
  put(dir, "memory.current", "314572800\n");
  put(dir, "memory.stat", "anon 209715200\nfile 104857600\ninactive_file 104857600\n");
  cr_assert_eq(fe_memory_cgroup("0::/user.slice/app\n", mount, &avail, &v1), 0);
  cr_assert_eq(avail, (size_t)(1024 - 200) << 20);
  cr_assert_eq(v1, 0);
  /* the root's memory.max (a container's own namespace) is read too */
  put(mount, "memory.max", "268435456\n");
  put(mount, "memory.current", "0\n");
  cr_assert_eq(fe_memory_cgroup("0::/user.slice/app\n", mount, &avail, &v1), 0);
  cr_assert_eq(avail, (size_t)256 << 20);
  /* v1: the memory controller's line (among others), its "unlimited" ignored */
  snprintf(dir, sizeof dir, "%s/memory/jobs/42", mount);
  put(dir, "memory.limit_in_bytes", "134217728\n");
  put(dir, "memory.usage_in_bytes", "33554432\n");
  put(dir, "memory.stat", "cache 0\ntotal_inactive_file 0\n");
  snprintf(dir, sizeof dir, "%s/memory/jobs", mount);
  put(dir, "memory.limit_in_bytes", "9223372036854771712\n");
  cr_assert_eq(fe_memory_cgroup("5:cpu,cpuacct:/\n4:memory:/jobs/42\n0::/\n", mount, &avail, &v1),
               0);
  cr_assert_eq(v1, 1);
  cr_assert_eq(avail, (size_t)96 << 20, "%zu", avail); /* v1's 96 MiB, under v2's root 256 */
  /* no memory controller named, or no limit anywhere: none */
  cr_assert_neq(fe_memory_cgroup("5:cpu,cpuacct:/\n4:memoryx:/jobs/42\n", mount, &avail, &v1), 0);
  cr_assert_neq(fe_memory_cgroup("0::/\n", "/nonexistent", &avail, &v1), 0);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", mount);
  cr_assert_eq(system(cmd), 0);
}

Test(memory, limit_bounds_what_is_available)
{
  unsetenv("FELAB_MEMORY_LIMIT");
  fe_memory_info m;
  cr_assert_eq(fe_memory_available(&m), 0, "%s", fe_error_message());
  cr_assert_eq(m.env, SIZE_MAX);
  cr_assert(m.meminfo != SIZE_MAX && m.meminfo > 0, "MemAvailable read on Linux");
  cr_assert(m.available <= m.meminfo);
  /* the limit less what this process holds (far less than 1 GiB) */
  setenv("FELAB_MEMORY_LIMIT", "1G", 1);
  cr_assert_eq(fe_memory_available(&m), 0, "%s", fe_error_message());
  cr_assert(m.env < (size_t)1 << 30 && m.env > (size_t)1 << 29, "env bound %zu", m.env);
  if (m.meminfo > m.env) {
    cr_assert_eq(m.available, m.env);
    cr_assert_str_eq(m.bound, "FELAB_MEMORY_LIMIT");
  }
  setenv("FELAB_MEMORY_LIMIT", "lots", 1);
  cr_assert_eq(fe_memory_available(&m), FE_ERR_ARG);
  cr_assert(strstr(fe_error_message(), "FELAB_MEMORY_LIMIT = 'lots' is not a size"), "%s",
            fe_error_message());
}

Test(memory, check_refuses_past_nine_tenths_with_both_sizes)
{
  setenv("FELAB_MEMORY_LIMIT", "1G", 1);
  fe_memory_info m;
  cr_assert_eq(fe_memory_available(&m), 0);
  cr_assert_eq(fe_memory_check(m.available / 2, "half"), 0, "%s", fe_error_message());
  cr_assert_eq(fe_memory_check((size_t)4 << 30, "refining %d hex cells", 2097152), FE_ERR_MEM);
  const char *msg = fe_error_message();
  cr_assert(strstr(msg, "out of host memory: refining 2097152 hex cells needs 4.0 GiB; "), "%s",
            msg);
  if (!strcmp(m.bound, "FELAB_MEMORY_LIMIT")) /* else the host has less than 1 GiB free */
    cr_assert(strstr(msg, " MiB available (FELAB_MEMORY_LIMIT)"), "%s", msg);
  /* within what is available but past the margin: refused, and says why */
  fe_error_clear();
  cr_assert_eq(fe_memory_available(&m), 0);
  cr_assert_eq(fe_memory_check(m.available - (m.available >> 5), "nearly all"), FE_ERR_MEM);
  cr_assert(strstr(fe_error_message(), "leaves a tenth free"), "%s", fe_error_message());
  /* small requests pass whatever the limit */
  setenv("FELAB_MEMORY_LIMIT", "0", 1);
  cr_assert_eq(fe_memory_check(FE_MEMORY_LEAST - 1, "small"), 0);
  cr_assert_eq(fe_memory_check(FE_MEMORY_LEAST, "not small"), FE_ERR_MEM);
}

Test(memory, box_refine_and_space_are_checked_before_they_allocate)
{
  fe_box_opts o;
  fe_box_opts_default(&o);
  o.type = FE_CELL_HEX;
  o.cells[0] = o.cells[1] = o.cells[2] = 16;
  fe_mesh *m = NULL, *r = NULL;
  cr_assert_eq(fe_mesh_box(&o, &m), 0, "%s", fe_error_message());
  setenv("FELAB_MEMORY_LIMIT", "1M", 1); /* less than the process holds: nothing available */
  cr_assert_eq(fe_mesh_refine(m, &r), FE_ERR_MEM);
  cr_assert_null(r);
  cr_assert(strstr(fe_error_message(), "mesh refine: refining 4096 hex cells into 32768 needs "),
            "%s", fe_error_message());
  fe_space *V = NULL;
  cr_assert_eq(fe_space_create(m, "Q3", &V), FE_ERR_MEM);
  cr_assert_null(V);
  cr_assert(strstr(fe_error_message(), "fe.space: the dof map of Q3 on 4096 cells needs "), "%s",
            fe_error_message());
  o.cells[0] = o.cells[1] = o.cells[2] = 64;
  fe_mesh *big = NULL;
  cr_assert_eq(fe_mesh_box(&o, &big), FE_ERR_MEM);
  cr_assert(strstr(fe_error_message(), "mesh.box: 64 x 64 x 64 cubes (262144 hex cells, 274625 "
                   "vertices) needs 15.8 MiB"), "%s", fe_error_message());
  unsetenv("FELAB_MEMORY_LIMIT"); /* the same calls go through with the host's memory */
  cr_assert_eq(fe_mesh_refine(m, &r), 0, "%s", fe_error_message());
  cr_assert_eq(r->ncells, 32768);
  fe_mesh_free(r);
  fe_mesh_free(m);
}

/* A populated block of several huge pages asks for them (fe_populate: madvise(MADV_HUGEPAGE)
 * over its whole 2 MiB pages): the kernel's map of the process marks the range "hg". Skipped
 * where the kernel has no transparent huge pages. */
Test(memory, large_blocks_ask_for_huge_pages)
{
  FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!thp) cr_skip_test("no transparent huge pages in this kernel");
  fclose(thp);
  const size_t bytes = (size_t)16 << 20, huge = (size_t)2 << 20;
  char *p = fe_alloc(bytes);
  cr_assert(p);
  const uintptr_t at = ((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1); /* a whole one */
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) {
    free(p);
    cr_skip_test("no /proc/self/smaps");
  }
  char line[512];
  int inside = 0, advised = -1;
  while (fgets(line, sizeof line, f) && advised < 0) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
      inside = lo <= at && at < hi;
    else if (inside && !strncmp(line, "VmFlags:", 8))
      advised = strstr(line, " hg") != NULL;
  }
  fclose(f);
  free(p);
  cr_assert_eq(advised, 1, "the block's whole 2 MiB pages are not marked for huge pages (%d)",
               advised);
}
