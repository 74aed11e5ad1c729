/* felab .msh reader's input stream: bytes read in buffers, lines and offsets kept for
 * messages, errors that name the place, and the numbers of ASCII and binary sections (the
 * sections themselves are read in msh-read.c). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/core/progress.h"
#include "engine/mesh/io/msh-read-private.h"

/* ----- the stream: bytes, lines and offsets ----- */

int msh_fill(msh_in *in)
{
  in->base += (long long)in->len;
  in->len = fread(in->buf, 1, sizeof in->buf, in->f);
  in->pos = 0;
  return in->len > 0;
}

/* Mark a place read before (a header that a count at the end contradicts). */
void msh_mark_at(msh_in *in, long long line, long long byte)
{
  in->at_line = line, in->at_byte = byte;
}

/* Set an error at the marked place: "file: line N ($Section): what" ("byte N" in binary). */
int msh_fail(const msh_in *in, int code, const char *file, int line, const char *func,
             const char *fmt, ...)
{
  char what[768], sec[48] = "";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (in->section) snprintf(sec, sizeof sec, " (%s)", in->section);
  return fe_error_set(code, file, line, func, "%s: %s %lld%s: %s", in->path,
                      in->binary ? "byte" : "line", in->binary ? in->at_byte : in->at_line, sec,
                      what);
}

/* The file ended (or could not be read) where what was expected. */
int msh_ended(msh_in *in, const char *what)
{
  msh_mark(in);
  if (ferror(in->f)) FAIL(in, FE_ERR_IO, "cannot read on (%s): %s", what, strerror(errno));
  FAIL(in, FE_ERR_IO, "the file ends where %s was expected: it is truncated", what);
}

/* Read the word at the stream (up to a blank) into w for a message, printable, cut short. */
void msh_word(msh_in *in, char *w, size_t n)
{
  size_t k = 0;
  int c;
  while ((c = msh_peek(in)) != EOF && !msh_is_blank(c)) {
    msh_next(in);
    if (k + 4 < n) w[k++] = c >= 32 && c < 127 ? (char)c : '?';
    else if (k + 4 == n) w[k++] = '.', w[k++] = '.', w[k++] = '.';
  }
  w[k] = 0;
}

/* Not what was expected at c, the byte at the mark (prefix: what of the word was read). */
int msh_unexpected(msh_in *in, int c, const char *prefix, const char *what)
{
  if (c == EOF) return msh_ended(in, what);
  if (c == '\n') FAIL(in, FE_ERR_IO, "the line ends where %s was expected", what);
  char w[48];
  msh_word(in, w, sizeof w);
  FAIL(in, FE_ERR_IO, "expected %s, found '%s%s'", what, prefix, w);
}

/* ----- numbers, ASCII and binary ----- */

int msh_ascii_size(msh_in *in, int within_line, size_t *v, const char *what)
{
  int c = msh_skip_blanks(in, within_line);
  if (c < '0' || c > '9') return msh_unexpected(in, c, "", what);
  size_t x = 0;
  while (c >= '0' && c <= '9') {
    if (x > (SIZE_MAX - (size_t)(c - '0')) / 10) FAIL(in, FE_ERR_IO, "%s is too large", what);
    x = 10 * x + (size_t)(c - '0');
    msh_next(in);
    c = msh_peek(in);
  }
  if (c != EOF && !msh_is_blank(c)) {
    char read[24];
    snprintf(read, sizeof read, "%zu", x);
    return msh_unexpected(in, c, read, what);
  }
  *v = x;
  return 0;
}

int msh_ascii_int(msh_in *in, int within_line, int *v, const char *what)
{
  int c = msh_skip_blanks(in, within_line), neg = c == '-';
  if (neg) msh_next(in), c = msh_peek(in);
  if (c < '0' || c > '9') return msh_unexpected(in, c, neg ? "-" : "", what);
  long long x = 0;
  while (c >= '0' && c <= '9') {
    x = 10 * x + (c - '0');
    if (x > (long long)INT_MAX + neg) FAIL(in, FE_ERR_IO, "%s is out of range", what);
    msh_next(in);
    c = msh_peek(in);
  }
  if (c != EOF && !msh_is_blank(c)) {
    char read[24];
    snprintf(read, sizeof read, "%s%lld", neg ? "-" : "", x);
    return msh_unexpected(in, c, read, what);
  }
  *v = (int)(neg ? -x : x);
  return 0;
}

static int msh_ascii_double(msh_in *in, int within_line, double *v, const char *what)
{
  int c = msh_skip_blanks(in, within_line);
  if (c == EOF || c == '\n') return msh_unexpected(in, c, "", what);
  char w[64];
  size_t k = 0;
  while ((c = msh_peek(in)) != EOF && !msh_is_blank(c) && k + 1 < sizeof w)
    w[k++] = (char)msh_next(in);
  w[k] = 0;
  char *end;
  *v = strtod(w, &end);
  if (end == w || *end || (c != EOF && !msh_is_blank(c))) {
    char rest[48];
    msh_word(in, rest, sizeof rest);
    FAIL(in, FE_ERR_IO, "expected %s, found '%.40s%s'", what, w, rest);
  }
  return 0;
}

/* n raw bytes (binary sections). */
int msh_raw(msh_in *in, void *dst, size_t n, const char *what)
{
  msh_mark(in);
  unsigned char *d = dst;
  while (n) {
    if (in->pos == in->len && !msh_fill(in)) return msh_ended(in, what);
    size_t k = in->len - in->pos < n ? in->len - in->pos : n;
    memcpy(d, in->buf + in->pos, k);
    in->pos += k, d += k, n -= k;
  }
  return 0;
}

/* A size_t: an unsigned integer (ASCII: on the current line when within_line). */
int msh_get_size(msh_in *in, int within_line, size_t *v, const char *what)
{
  if (!in->binary) return msh_ascii_size(in, within_line, v, what);
  uint64_t x;
  FE_CHECK(msh_raw(in, &x, 8, what));
  *v = in->swap ? __builtin_bswap64(x) : x;
  return 0;
}

int msh_get_int(msh_in *in, int within_line, int *v, const char *what)
{
  if (!in->binary) return msh_ascii_int(in, within_line, v, what);
  uint32_t x;
  FE_CHECK(msh_raw(in, &x, 4, what));
  if (in->swap) x = __builtin_bswap32(x);
  memcpy(v, &x, 4);
  return 0;
}

int msh_get_double(msh_in *in, int within_line, double *v, const char *what)
{
  if (!in->binary) return msh_ascii_double(in, within_line, v, what);
  uint64_t x;
  FE_CHECK(msh_raw(in, &x, 8, what));
  if (in->swap) x = __builtin_bswap64(x);
  memcpy(v, &x, 8);
  return 0;
}

/* Nothing more on this line but blanks (ASCII). */
int msh_ascii_end_line(msh_in *in, const char *after)
{
  int c = msh_skip_blanks(in, 1);
  if (c == '\n') {
    msh_next(in);
    return 0;
  }
  if (c == EOF) return 0;
  char w[48];
  msh_word(in, w, sizeof w);
  FAIL(in, FE_ERR_IO, "expected the end of the line after %s, found '%s'", after, w);
}

int msh_end_line(msh_in *in, const char *after)
{
  return in->binary ? 0 : msh_ascii_end_line(in, after);
}

/* n items of at least `each` bytes must fit in what is left of the file. */
int msh_check_count(msh_in *in, size_t n, size_t each, const char *what)
{
  long long left = in->size - (in->base + (long long)in->pos);
  if (left < 0) left = 0;
  if (n > (size_t)left / each)
    FAIL(in, FE_ERR_IO,
         "%zu %s do not fit in the %lld bytes left of the file: it is truncated, or the count "
         "is wrong",
         n, what, left);
  return 0;
}

/* The next line that is not blank, without its end, into s (at most n - 1 bytes, made
 * printable; the rest is skipped). 0 at the end of the file. */
int msh_get_line(msh_in *in, char *s, size_t n)
{
  int c = msh_skip_blanks(in, 0);
  size_t k = 0;
  s[0] = 0;
  if (c == EOF) return 0;
  while ((c = msh_next(in)) != EOF && c != '\n')
    if (k + 1 < n) s[k++] = c >= 32 && c < 127 ? (char)c : '?';
  while (k && (s[k - 1] == '\r' || s[k - 1] == ' ' || s[k - 1] == '\t')) k--;
  s[k] = 0;
  return 1;
}

/* The line $End<name> that closes the section. */
int msh_section_end(msh_in *in, const char *name)
{
  char want[64], got[64];
  snprintf(want, sizeof want, "$End%s", name);
  if (!msh_get_line(in, got, sizeof got)) return msh_ended(in, want);
  if (strcmp(got, want))
    FAIL(in, FE_ERR_IO, "expected %s, found '%.40s': a count in the section is wrong", want, got);
  in->section = NULL;
  return 0;
}

/* Lines up to $End<name>, for sections felab does not read. */
int msh_skip_section(msh_in *in, const char *name)
{
  char want[300], got[300];
  snprintf(want, sizeof want, "$End%s", name);
  while (msh_get_line(in, got, sizeof got))
    if (!strcmp(got, want)) return 0;
  return msh_ended(in, want);
}

/* Every 64k nodes or elements: the progress line and Ctrl-C. */
int msh_tick(msh_in *in)
{
  if (++in->items & 0xffff) return 0;
  fe_progress_fraction(in->size ? (double)(in->base + (long long)in->pos) / (double)in->size : 0);
  return fe_interrupt_check();
}
