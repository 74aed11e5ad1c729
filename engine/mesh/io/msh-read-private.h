/* Private to engine/mesh/io/msh-stream.c and engine/mesh/io/msh-read.c: the .msh reader's input
 * stream (bytes, lines, offsets for messages), its numbers (ASCII and binary) and its errors.
 * The stream is in msh-stream.c, the sections and the arrays in msh-read.c. Not part of
 * felab's API. */
#ifndef FE_MSH_READ_PRIVATE_H
#define FE_MSH_READ_PRIVATE_H

#include <stddef.h>
#include <stdio.h>

typedef struct msh_in {
  FILE *f;
  const char *path;
  unsigned char buf[1 << 16];
  size_t pos, len;            /* the next byte is buf[pos], of len read */
  long long base;             /* file offset of buf[0] */
  long long size;             /* of the file, to bound counts */
  long long line;             /* line of the next byte, from 1 */
  long long at_line, at_byte; /* where the item being read starts, for messages */
  int binary;                 /* the sections after $MeshFormat hold binary numbers */
  int swap;                   /* ... in the other byte order */
  const char *section;        /* the section being read ("$Nodes"), for messages */
  size_t items;               /* nodes and elements read, for progress and Ctrl-C */
} msh_in;

/* Read the next buffer of the file; 0 at its end. */
int msh_fill(msh_in *in);

static inline int msh_peek(msh_in *in)
{
  if (in->pos == in->len && !msh_fill(in)) return EOF;
  return in->buf[in->pos];
}

static inline int msh_next(msh_in *in)
{
  int c = msh_peek(in);
  if (c != EOF) {
    in->pos++;
    in->line += c == '\n';
  }
  return c;
}

static inline int msh_is_blank(int c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Remember where the next item starts. */
static inline void msh_mark(msh_in *in)
{
  in->at_line = in->line;
  in->at_byte = in->base + (long long)in->pos;
}

/* Skip blanks, and line ends unless within_line; mark the next item and return its first
 * byte (EOF at the end). */
static inline int msh_skip_blanks(msh_in *in, int within_line)
{
  for (;;) {
    int c = msh_peek(in);
    if (c == ' ' || c == '\t' || c == '\r' || (c == '\n' && !within_line)) {
      msh_next(in);
      continue;
    }
    msh_mark(in);
    return c;
  }
}

/* Set an error at the marked place: "file: line N ($Section): what" ("byte N" in binary);
 * file, line, func: the caller's, for the traceback. */
__attribute__((format(printf, 6, 7))) int msh_fail(const msh_in *in, int code, const char *file,
                                                   int line, const char *func, const char *fmt,
                                                   ...);
#define FAIL(in, code, ...) \
  return msh_fail((in), (code), __FILE__, __LINE__, __func__, __VA_ARGS__)

/* Mark a place read before (a header that a count at the end contradicts). */
void msh_mark_at(msh_in *in, long long line, long long byte);
/* The file ended (or could not be read) where what was expected. */
int msh_ended(msh_in *in, const char *what);
/* Read the word at the stream (up to a blank) into w for a message, printable, cut short. */
void msh_word(msh_in *in, char *w, size_t n);
/* Not what was expected at c, the byte at the mark (prefix: what of the word was read). */
int msh_unexpected(msh_in *in, int c, const char *prefix, const char *what);
/* ASCII numbers (on the current line when within_line). */
int msh_ascii_size(msh_in *in, int within_line, size_t *v, const char *what);
int msh_ascii_int(msh_in *in, int within_line, int *v, const char *what);
/* n raw bytes (binary sections). */
int msh_raw(msh_in *in, void *dst, size_t n, const char *what);
/* Numbers, ASCII or binary as the file is. */
int msh_get_size(msh_in *in, int within_line, size_t *v, const char *what);
int msh_get_int(msh_in *in, int within_line, int *v, const char *what);
int msh_get_double(msh_in *in, int within_line, double *v, const char *what);
/* Nothing more on this line but blanks (ASCII; end_line: nothing to check in binary). */
int msh_ascii_end_line(msh_in *in, const char *after);
int msh_end_line(msh_in *in, const char *after);
/* n items of at least `each` bytes must fit in what is left of the file. */
int msh_check_count(msh_in *in, size_t n, size_t each, const char *what);
/* The next line that is not blank, without its end, into s; 0 at the end of the file. */
int msh_get_line(msh_in *in, char *s, size_t n);
/* The line $End<name> that closes the section. */
int msh_section_end(msh_in *in, const char *name);
/* Lines up to $End<name>, for sections felab does not read. */
int msh_skip_section(msh_in *in, const char *name);
/* Every 64k nodes or elements: the progress line and Ctrl-C. */
int msh_tick(msh_in *in);

#endif
