/* felab growable strings. */
#include "engine/core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"

/* Make room for `extra` more bytes plus the NUL. */
static int strbuf_reserve(fe_strbuf *b, size_t extra)
{
  if (b->failed) return -1;
  if (b->len + extra + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *s = realloc(b->s, cap);
  if (!s) {
    b->failed = 1;
    return -1;
  }
  b->s = s;
  b->cap = cap;
  return 0;
}

void fe_strbuf_printf(fe_strbuf *b, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || strbuf_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void fe_strbuf_append(fe_strbuf *b, const char *text)
{
  size_t n = strlen(text);
  if (strbuf_reserve(b, n)) return;
  memcpy(b->s + b->len, text, n + 1);
  b->len += n;
}

int fe_strbuf_finish(fe_strbuf *b, char **out)
{
  if (b->failed || strbuf_reserve(b, 0)) {
    fe_strbuf_free(b);
    FE_ERROR(FE_ERR_MEM, "out of host memory while building a string");
  }
  *out = b->s;
  b->s = NULL;
  b->len = b->cap = 0;
  return 0;
}

void fe_strbuf_free(fe_strbuf *b)
{
  free(b->s);
  b->s = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
}
