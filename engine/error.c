/* felab error state: one current error with a message and a traceback of frames. */
#include "engine/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void *fe_malloc(size_t bytes, const char *what)
{
  void *p = malloc(bytes ? bytes : 1);
  if (!p)
    fe_error_set(FE_ERR_MEM, __FILE__, __LINE__, __func__,
                 "out of host memory: %s needs %.1f MiB", what, bytes / 1048576.0);
  return p;
}

void *fe_calloc(size_t n, size_t size, const char *what)
{
  void *p = calloc(n ? n : 1, size ? size : 1);
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
