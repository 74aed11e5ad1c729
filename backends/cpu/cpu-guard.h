/* felab cpu backend: a kernel's trial run in a forked child, so that generated code that
 * faults (a raw C physics reading a bad pointer, a division by zero gcc made a trap) ends
 * the child and becomes an error, never the session. The child sees every buffer (the pages
 * are shared copy-on-write) and its writes are lost with it. */
#ifndef FE_CPU_GUARD_H
#define FE_CPU_GUARD_H

#include <stddef.h>

typedef void (*cpu_launcher)(void **args);

typedef enum {
  CPU_TRIAL_CLEAN,       /* the kernel returned */
  CPU_TRIAL_FAULT,       /* a fault signal ended it (SIGSEGV, SIGBUS, SIGILL, SIGFPE, ...) */
  CPU_TRIAL_EXIT,        /* it ended the process itself (exit, _exit) */
  CPU_TRIAL_INTERRUPTED, /* Ctrl-C while it ran: the child was killed */
  CPU_TRIAL_KILLED,      /* another signal from outside (the OOM killer's SIGKILL): no verdict */
  CPU_TRIAL_UNAVAILABLE  /* no child could be made (fork failed, no fork here) */
} cpu_trial_outcome;

typedef struct cpu_trial {
  cpu_trial_outcome outcome;
  int signal;    /* the signal that ended the child (FAULT, KILLED) */
  int code;      /* its si_code, or 0 where the handler did not run */
  void *addr;    /* si_addr: the address touched (SIGSEGV, SIGBUS) or the instruction */
  void *pc;      /* the faulting instruction, or NULL where not known */
  int status;    /* the exit status (EXIT) */
} cpu_trial;

/* Run fn(args) once in a forked child, on `threads` OpenMP threads (a pool of the child's
 * own; 1: the forking thread alone), and wait for it; *t says how it ended. Ctrl-C
 * (fe_interrupt_flag) while it runs kills the child. */
void cpu_guard_trial(cpu_launcher fn, void **args, int threads, cpu_trial *t);

/* One line on a trial that ended badly: the signal, what it means, the address. */
void cpu_guard_describe(const cpu_trial *t, char *buf, size_t n);

/* Where the faulting instruction pc lies: in the object base.so (compiled from base.c by
 * `cc flags`), the line of base.c, the function around it and the line's text (base.c
 * compiled once more with -g, which changes no instruction, read by addr2line); else the
 * object or library and the offset. Into buf; empty when pc is NULL. */
void cpu_guard_locate(const char *cc, const char *flags, const char *base, void *pc, char *buf,
                      size_t n);

#endif
