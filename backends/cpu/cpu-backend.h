/* felab cpu backend, private: the state of the backend, its compiled modules and kernels,
 * shared by the files of backends/cpu/ and by nothing else (the engine sees only the table in
 * backend.h).
 *
 *   cpu-backend.c   open, close, query, host memory as buffers, the group runs; the table
 *   cpu-program.c   the dialect preamble, compile into a cached shared object, kernels, launch
 *                   (a kernel's first launch tried in a child: cpu-guard.c)
 *   cpu-mca.c       a kernel's hot loop found in its assembly and simulated by llvm-mca
 *   cpu-vector.c    vector work: fill, axpby, pointwise, dot, reduce, the fused CG steps, CG
 *                   with its scalars in a state (cg_begin ... cg_end, cg_parts)
 *   cpu-guard.c     a kernel's trial run in a forked child (cpu-guard.h) */
#ifndef FE_CPU_BACKEND_H
#define FE_CPU_BACKEND_H

#include <pthread.h>
#include <stddef.h>

#include "backends/backend.h"
#include "backends/cpu/cpu-guard.h"

struct fe_module {
  void *handle;         /* dlopen handle */
  struct fe_module *next;
  char base[1100];      /* its source and object in the cache, less .c and .so */
  char what[160];       /* its source's first comment ("residual of raw on P1 ..."), or "" */
  int untried;          /* its kernels run without a trial (the calibration's, see cpu_kernel) */
  char *asm_text;       /* the assembly its object was made from, while among the last
                         * CPU_ASM_KEPT compiled here (for llvm-mca: cpu-mca.c), else NULL */
};

struct fe_kernel {
  cpu_launcher fn;
  char name[64];
  fe_module *mod;
  int simulated;        /* llvm-mca asked (once a kernel), */
  double loop_cycles;   /* its answer for the hot loop (0: none) */
  int trust;            /* 0: not run yet, 1: its trial run returned, -1: it faulted there */
  char *fault;          /* the error of a kernel that faulted, repeated at every launch */
};

/* The modules compiled in this session whose assembly stays in memory: a kernel's hot loop is
 * simulated at its first report, just after the compile, and a text of over CPU_ASM_MAX bytes
 * is not kept (cpu-mca.c compiles such a source once more) */
#define CPU_ASM_KEPT 8
#define CPU_ASM_MAX (8 << 20)

typedef struct cpu_impl {
  char cache[1024];     /* directory of compiled objects */
  char cc[256];         /* compiler command */
  char flags[256];      /* compiler flags (part of the cache key) */
  char mca[256];        /* llvm-mca's command (FELAB_MCA; "off": none) */
  int has_mca;          /* -1 not asked yet, 0 absent, 1 on the PATH */
  fe_module *modules;   /* every module loaded, closed at the end */
  int nkernels, cap;
  fe_kernel **kernels;  /* every kernel handed out (a session may make any number) */
  int trials;           /* first launches are tried in a child (FELAB_CPU_TRIAL=off: not) */
  int trial_all;        /* FELAB_CPU_TRIAL=all: every kernel's, else those of user C alone */
  pthread_mutex_t trial_lock; /* one trial run at a time (cpu_kernel_vet) */
  fe_module *asm_kept[CPU_ASM_KEPT]; /* the modules holding asm_text, a ring */
  int asm_next;         /* the ring's slot the next one takes */
  pthread_mutex_t asm_lock; /* the ring and the modules' asm_text */
} cpu_impl;

/* CG's (p, q) parts on the cpu (backend.h's cg_parts): a slot's FE_PQ_PARTS x FE_PQ_STRIDE
 * doubles hold a 64-byte line (CPU_PQ_LINE doubles) for each of CPU_PQ_THREADS kernel threads,
 * thread t's sum at CPU_PQ_LINE t (the dialect's FE_PQ_SUM, cpu-program.c) */
#define CPU_PQ_LINE 8
#define CPU_PQ_THREADS (FE_PQ_PARTS * FE_PQ_STRIDE / CPU_PQ_LINE)

/* ---- cpu-program.c ---- */
const char *cpu_preamble(void *impl, fe_precision prec);
int cpu_compile(void *impl, const char *source, fe_module **mod, double *seconds, int *cached);
void cpu_module_free(void *impl, fe_module *mod);
int cpu_kernel(void *impl, fe_module *mod, const char *name, fe_kernel **k);
int cpu_launch(void *impl, fe_kernel *k, size_t ngroups, size_t group_size, int nargs,
               const fe_arg *args, fe_precision prec, double *seconds);

/* ---- cpu-program.c ---- */
/* The text of file path (NULL if it cannot be read or is over max bytes); the file removed. */
char *cpu_take_file(const char *path, long max);

/* ---- cpu-mca.c ---- */
int cpu_kernel_resources(void *impl, fe_kernel *k, fe_kernel_resources *res);
int cpu_mca_available(cpu_impl *c);
void cpu_asm_keep(cpu_impl *c, fe_module *m, char *text);

/* ---- cpu-vector.c ---- */
int cpu_fill(void *impl, fe_buffer *x, size_t n, fe_precision prec, double value);
int cpu_axpby(void *impl, fe_buffer *y, double a, const fe_buffer *x, double b, size_t n,
              fe_precision prec);
int cpu_pointwise(void *impl, fe_buffer *z, const fe_buffer *x, const fe_buffer *y, int divide,
                  size_t n, fe_precision prec);
int cpu_dot(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
            double *result);
int cpu_reduce(void *impl, const fe_buffer *x, size_t n, fe_precision prec, fe_reduce_op op,
               double *result);
int cpu_cg_update(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p, const fe_buffer *q,
                  const fe_buffer *d, double alpha, size_t n, fe_precision prec, double *rr,
                  double *rz);
int cpu_cg_direction(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                     double beta, size_t n, fe_precision prec);
int cpu_cg_begin(void *impl, double rz, void **state);
int cpu_cg_pq(void *impl, void *state, const fe_buffer *p, const fe_buffer *q, size_t n,
              fe_precision prec, int it);
int cpu_cg_step(void *impl, void *state, fe_buffer *x, fe_buffer *r, fe_buffer *p,
                const fe_buffer *q, const fe_buffer *d, size_t n, fe_precision prec, int it,
                int half);
int cpu_cg_split(void *impl, void *state, int it, int what, double *v, const fe_node_sum *ns);
int cpu_cg_wait(void *impl, void *state, int it, double *pq, double *rr, double *rz);
void cpu_cg_end(void *impl, void *state);
int cpu_cg_parts(void *impl, void *state, int it, fe_buffer *parts, int *slot);

#endif
