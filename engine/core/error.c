/* felab error state: one current error with a message and a traceback of frames. */
#include "engine/core/error.h"

#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static char error_message[4096];
static char error_trace[2048];
static int error_code;

volatile int fe_interrupt_flag;

static const char *const error_names[] = {
    "ok",          "argument error", "out of memory",         "i/o error",
    "compile error", "backend error", "unavailable",          "mesh error",
    "interrupted", "solver error",   "internal error",
};

const char *fe_error_name(int code)
{
  if (code < 0 || code > FE_ERR_INTERNAL) return "unknown error";
  return error_names[code];
}

/* Append one "  at func (file:line)" frame to the trace. */
static void trace_add(const char *file, int line, const char *func)
{
  size_t len = strlen(error_trace);
  if (len + 1 >= sizeof error_trace) return;
  snprintf(error_trace + len, sizeof error_trace - len, "  at %s (%s:%d)\n", func, file, line);
}

int fe_error_set(int code, const char *file, int line, const char *func, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_message, sizeof error_message, fmt, ap);
  va_end(ap);
  error_trace[0] = '\0';
  error_code = code;
  trace_add(file, line, func);
  return code;
}

int fe_error_push(int code, const char *file, int line, const char *func)
{
  if (!error_code) { /* a failure that set no message: still say something */
    error_code = code;
    snprintf(error_message, sizeof error_message, "%s", fe_error_name(code));
    error_trace[0] = '\0';
  }
  trace_add(file, line, func);
  return code;
}

int fe_error_context(const char *fmt, ...)
{
  char head[512], whole[sizeof error_message];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  size_t h = strlen(head), m = strlen(error_message);
  if (h + 2 + m >= sizeof whole) m = sizeof whole - h - 3; /* head is at most 511 */
  memcpy(whole, head, h);
  memcpy(whole + h, ": ", 2);
  memcpy(whole + h + 2, error_message, m);
  whole[h + 2 + m] = '\0';
  memcpy(error_message, whole, h + 3 + m);
  return error_code;
}

const char *fe_error_message(void) { return error_code ? error_message : ""; }
const char *fe_error_trace(void) { return error_trace; }
int fe_error_code(void) { return error_code; }

void fe_error_clear(void)
{
  error_code = 0;
  error_message[0] = '\0';
  error_trace[0] = '\0';
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* A fresh page costs a fault when first written: taken one at a time from inside a loop it
 * costs more than when the kernel populates a range, and more again while OpenMP's other
 * thread still spins; so a range is populated at once, on every thread (measured faster than
 * a page at a time or one memset). Pages already present cost a walk of their tables. Where
 * madvise cannot (a kernel before 5.14), the pages fault in when written. */
void fe_populate(void *p, size_t bytes)
{
  const size_t page = 4096, huge = (size_t)2 << 20;
  if (bytes < FE_POPULATE_LEAST) return;
  /* the whole 2 MiB pages inside the range as huge pages where the kernel lends them
   * (transparent huge pages, "madvise" or "always"): a sparse matrix's product gathers x
   * through its columns over a window of megabytes, and with 4 KiB pages its time moved from
   * process to process with where the pages fell (the AMD EPYC VM, one thread, csr's rows of a
   * P1 box 8.7-10.8 ns in three processes, 7.7-7.8 on huge pages; Q1 11.7-11.8 and 10.8-11.0) */
  char *h0 = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
  char *h1 = (char *)(((uintptr_t)p + bytes) & ~(uintptr_t)(huge - 1));
  if (h1 > h0) (void)madvise(h0, (size_t)(h1 - h0), MADV_HUGEPAGE);
  char *a = (char *)(((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1));
  char *b = (char *)(((uintptr_t)p + bytes) & ~(uintptr_t)(page - 1));
  size_t n = (size_t)(b - a) / page;
#pragma omp parallel if (!omp_in_parallel())
  {
    int t = omp_get_thread_num(), T = omp_get_num_threads();
    size_t lo = n * t / T, hi = n * (t + 1) / T;
    if (hi > lo) (void)madvise(a + lo * page, (hi - lo) * page, MADV_POPULATE_WRITE);
  }
}

void *fe_alloc(size_t bytes)
{
  void *p = malloc(bytes ? bytes : 1);
  if (p) fe_populate(p, bytes);
  return p;
}

void *fe_zalloc(size_t n, size_t size)
{
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (p) fe_populate(p, n * size);
  return p;
}

void *fe_malloc(size_t bytes, const char *what)
{
  void *p = fe_alloc(bytes);
  if (!p)
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                 "out of host memory: %s needs %.1f MiB", what, bytes / 1048576.0);
  return p;
}

void *fe_calloc(size_t n, size_t size, const char *what)
{
  void *p = fe_zalloc(n, size);
  if (!p)
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                 "out of host memory: %s needs %.1f MiB", what, (double)n * size / 1048576.0);
  return p;
}

int fe_interrupt_check(void)
{
  if (!fe_interrupt_flag) return 0;
  fe_interrupt_flag = 0;
  return fe_error_set(FE_ERR_INTERRUPTED, __FILE__, __LINE__, __func__, "interrupted");
}
