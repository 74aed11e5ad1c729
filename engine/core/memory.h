/* felab host memory: how much the process may still take, and a check made before a large
 * allocation.
 *
 * Linux overcommits: malloc of more than the machine holds may succeed, and the kernel's OOM
 * killer then ends the whole process when the pages are touched (felab touches a large block
 * at once, fe_populate), taking a user's session with it. So whatever allocates in
 * proportion to a mesh (a refinement, a space's dof map, an assembled matrix, element
 * matrices, a cpu buffer) first estimates its bytes and asks fe_memory_check, which refuses
 * with FE_ERR_MEM and both sizes in the message:
 *
 *   FE_CHECK(fe_memory_check(bytes, "mesh refine: refining %d %s cells into %d", ...));
 *   -> "out of host memory: mesh refine: refining 262144 hex cells into 2097152 needs 276.4 MiB;
 *       110.2 MiB available (FELAB_MEMORY_LIMIT)"
 *
 * What is available is the least of:
 *   MemAvailable of /proc/meminfo (what the kernel can hand out without swapping);
 *   the memory cgroup's limit less its usage (cgroup v2 memory.max - memory.current, v1
 *   memory.limit_in_bytes - memory.usage_in_bytes; reclaimable file pages counted free), at
 *   the process's cgroup and each one above it;
 *   RLIMIT_AS less the address space mapped, RLIMIT_DATA less the data mapped (ulimit -v, -d);
 *   FELAB_MEMORY_LIMIT, when set, less what the process holds (its resident pages): bytes, or
 *   a number with a suffix K, M, G or T (powers of 1024; "256M", "1.5G"). It lets a test (or
 *   a user sharing a machine) run felab as if the host had that much memory, so that a
 *   refusal is reached in milliseconds without exhausting anything; a value that is not a
 *   size makes every check an FE_ERR_ARG error that says so.
 * A request above 90% of that is refused (the rest is left for what the estimate does not
 * see: the allocator's slack, the kernels, Lua); one under FE_MEMORY_LEAST is never checked.
 * A buffer of a backend is checked by fe_memory_check_on: against the host's memory where the
 * backend's buffers are host memory (the cpu, an OpenCL cpu device), else against the device's
 * memory less what felab holds there (the backend's own alloc then checks what the driver
 * says is free: cuda's cuMemGetInfo). */
#ifndef FE_MEMORY_H
#define FE_MEMORY_H

#include <stddef.h>

/* Requests under 1 MiB pass unchecked: the margin covers them, and small vectors are made
 * often (a check reads a few files of /proc and /sys). */
enum { FE_MEMORY_LEAST = 1 << 20 };

/* What bounds the memory available; SIZE_MAX where a bound is absent or unknown. */
typedef struct fe_memory_info {
  size_t available;  /* the least of the bounds below */
  const char *bound; /* the one that sets it, for messages ("MemAvailable", ...) */
  size_t meminfo;    /* MemAvailable */
  size_t cgroup;     /* the tightest cgroup's limit less its usage */
  size_t rlimit;     /* the tighter of RLIMIT_AS and RLIMIT_DATA less what is mapped */
  size_t env;        /* FELAB_MEMORY_LIMIT less the process's resident bytes */
} fe_memory_info;

/* The host memory this process may take now (FE_ERR_ARG: FELAB_MEMORY_LIMIT is no size). */
int fe_memory_available(fe_memory_info *info);
/* 0 when `bytes` fit in 90% of what is available, else FE_ERR_MEM with a message naming the
 * request (printf-style `what`, e.g. "refining %d hexes"), its size, what is available and
 * what bounds it. */
int fe_memory_check(size_t bytes, const char *what, ...) __attribute__((format(printf, 2, 3)));
/* The same for a buffer of `bytes` on backend be: fe_memory_check where be's buffers are host
 * memory; on a GPU, FE_ERR_MEM when they exceed its global memory less felab's buffers there
 * ("out of device memory on NAME: what needs ...; ... available (... of device memory, ... of
 * it held by felab's buffers)"). Requests under FE_MEMORY_LEAST pass unchecked. */
struct fe_backend;
int fe_memory_check_on(const struct fe_backend *be, size_t bytes, const char *what, ...)
    __attribute__((format(printf, 3, 4)));

/* "232.1 MiB", "18.4 GiB", "512 B" into buf (at least 16 chars). */
void fe_memory_format(size_t bytes, char *buf, size_t n);
/* A size: digits with an optional fraction, then optionally K, M, G or T (any case, powers of
 * 1024) and an optional "iB" or "B"; spaces around are allowed. 0 or -1 (not a size). */
int fe_memory_parse_size(const char *text, size_t *bytes);
/* MemAvailable from the text of /proc/meminfo, in bytes. 0 or -1 (absent). */
int fe_memory_parse_meminfo(const char *text, size_t *bytes);
/* The tightest memory cgroup's limit less its usage into *avail, from the cgroups of the text
 * of /proc/self/cgroup ("0::/path" for v2, "N:...memory...:/path" for v1) and every cgroup
 * above them, read under mount (v2) or mount/memory (v1); *v1 says which holds it. 0, or -1
 * (no limit anywhere). */
int fe_memory_cgroup(const char *cgroups, const char *mount, size_t *avail, int *v1);

#endif
