/* felab growable strings, for generated source and reports. */
#ifndef FE_STRBUF_H
#define FE_STRBUF_H

#include <stddef.h>

typedef struct fe_strbuf {
  char *s;      /* NUL-terminated contents (NULL until the first append) */
  size_t len;   /* bytes used, without the NUL */
  size_t cap;   /* bytes allocated */
  int failed;   /* an allocation failed: contents are incomplete */
} fe_strbuf;

void fe_strbuf_printf(fe_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fe_strbuf_append(fe_strbuf *b, const char *text);
/* Hand the string over (caller frees); an error if an allocation failed. */
int fe_strbuf_finish(fe_strbuf *b, char **out);
void fe_strbuf_free(fe_strbuf *b);

#endif
