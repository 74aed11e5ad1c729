/* felab engine errors: every engine function returns an int error code (0 = success).
 * FE_ERROR sets a formatted message and returns; FE_CHECK propagates a failing call and
 * adds a frame, so an error reaches the shell with its own traceback (PETSc style). */
#ifndef FE_ERROR_H
#define FE_ERROR_H

#include <stddef.h>

typedef enum {
  FE_OK = 0,
  FE_ERR_ARG,          /* bad argument from the user */
  FE_ERR_MEM,          /* host or device out of memory */
  FE_ERR_IO,           /* file could not be read or written */
  FE_ERR_COMPILE,      /* a generated kernel did not compile */
  FE_ERR_BACKEND,      /* a backend call failed */
  FE_ERR_UNAVAILABLE,  /* backend or feature not available here */
  FE_ERR_MESH,         /* invalid mesh (inverted cell, bad tag, ...) */
  FE_ERR_INTERRUPTED,  /* Ctrl-C */
  FE_ERR_SOLVER,       /* solver breakdown or divergence */
  FE_ERR_INTERNAL      /* a bug in felab */
} fe_err;

/* Record a new error (replacing any earlier one) and return code. */
int fe_error_set(int code, const char *file, int line, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Add a traceback frame to the current error and return code. */
int fe_error_push(int code, const char *file, int line, const char *func);
/* Put "<context>: " before the current message (printf-style); returns the current code. */
int fe_error_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *fe_error_message(void); /* the message alone */
const char *fe_error_trace(void);   /* frames, innermost first, one per line */
int fe_error_code(void);
void fe_error_clear(void);
const char *fe_error_name(int code);

#define FE_ERROR(code, ...) return fe_error_set((code), __FILE__, __LINE__, __func__, __VA_ARGS__)
#define FE_CHECK(call)                                                                    \
  do {                                                                                    \
    int fe_check_rc_ = (call);                                                            \
    if (fe_check_rc_) return fe_error_push(fe_check_rc_, __FILE__, __LINE__, __func__); \
  } while (0)
#define FE_ASSERT(cond, code, ...)         \
  do {                                     \
    if (!(cond)) FE_ERROR(code, __VA_ARGS__); \
  } while (0)

/* The pages of [p, p + bytes) made present now, by the kernel on every thread, where bytes is
 * at least FE_POPULATE_LEAST (smaller blocks fault in as they are written). */
enum { FE_POPULATE_LEAST = 1 << 20 };
void fe_populate(void *p, size_t bytes);

/* Checked allocation: on failure sets FE_ERR_MEM naming what and how much; a block of at
 * least FE_POPULATE_LEAST bytes comes with its pages present (fe_populate). */
void *fe_malloc(size_t bytes, const char *what);
/* The same without setting an error (the caller names what failed): malloc and calloc whose
 * large blocks come with their pages present. */
void *fe_alloc(size_t bytes);
void *fe_zalloc(size_t n, size_t size);
void *fe_calloc(size_t n, size_t size, const char *what);
#define FE_MALLOC(ptr, n, what)                                                       \
  do {                                                                                \
    (ptr) = fe_malloc((size_t)(n) * sizeof(*(ptr)), (what));                          \
    if (!(ptr)) return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);       \
  } while (0)
#define FE_CALLOC(ptr, n, what)                                                       \
  do {                                                                                \
    (ptr) = fe_calloc((size_t)(n), sizeof(*(ptr)), (what));                           \
    if (!(ptr)) return fe_error_push(FE_ERR_MEM, __FILE__, __LINE__, __func__);       \
  } while (0)

/* Ctrl-C: the shell's SIGINT handler sets the flag; long engine loops call
 * fe_interrupt_check() between batches, which clears it and returns FE_ERR_INTERRUPTED. */
extern volatile int fe_interrupt_flag;
int fe_interrupt_check(void);
#define FE_CHECK_INTERRUPT() FE_CHECK(fe_interrupt_check())

#endif
