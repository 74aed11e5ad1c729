/* felab cpu backend: a kernel's trial run in a forked child (see cpu-guard.h).
 *
 * Why a child and not a handler in the session: a fault inside an OpenMP region leaves the
 * other threads mid-loop and the runtime's state unknown, so jumping out of a SIGSEGV handler
 * (sigsetjmp/siglongjmp) is not safe; a child that dies takes nothing with it.
 *
 * OpenMP after fork: the forking thread's pool of threads is the parent's, and its threads
 * are not in the child, so the child never asks that pool for a team larger than one. A
 * launch that wants a team runs on a new thread of the child's own, whose first parallel
 * region makes a pool of the child's. The handlers only write what they saw into a page
 * shared with the parent and _exit, so they work the same under AddressSanitizer, whose own
 * SIGSEGV handler would print a report and exit instead. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "backends/cpu/cpu-guard.h"
#include "engine/core/error.h"

/* What the child's handler saw, in a page shared with the parent. */
typedef struct cpu_guard_record {
  int claimed;                  /* a handler is writing (the first thread to fault) */
  volatile sig_atomic_t signal; /* the fault's signal (0: none) */
  volatile sig_atomic_t done;   /* the kernel returned */
  int code;                     /* si_code */
  void *addr;                   /* si_addr */
  void *pc;                     /* the faulting instruction */
} cpu_guard_record;

/* The signals a fault in generated code raises (SIGABRT: abort or a failed assert in a body;
 * SIGTRAP and SIGSYS for completeness). */
static const int cpu_guard_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS};
#define CPU_GUARD_NSIGNALS (int)(sizeof cpu_guard_signals / sizeof cpu_guard_signals[0])
#define CPU_GUARD_FAULT_EXIT 125   /* the child's status after its handler ran */
#define CPU_GUARD_ALTSTACK (1 << 16) /* the handlers' stack of a thread */
#define CPU_GUARD_POLL_MS 100       /* how often the parent looks at the Ctrl-C flag */

/* The child's record; a signal handler takes no argument of ours, and only the child sets it. */
static cpu_guard_record *cpu_guard_child_record;

static int cpu_guard_is_fault(int sig)
{
  for (int i = 0; i < CPU_GUARD_NSIGNALS; i++)
    if (cpu_guard_signals[i] == sig) return 1;
  return 0;
}

/* The instruction a signal interrupted, from the handler's context (NULL where not known). */
static void *cpu_guard_pc(void *context)
{
#if defined(__linux__) && defined(__x86_64__)
  return (void *)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP];
#elif defined(__linux__) && defined(__aarch64__)
  return (void *)((ucontext_t *)context)->uc_mcontext.pc;
#else
  (void)context;
  return NULL;
#endif
}

/* The child's handler: note the fault for the parent and end (no core file, no report). */
static void cpu_guard_on_fault(int sig, siginfo_t *info, void *context)
{
  cpu_guard_record *r = cpu_guard_child_record;
  if (r && !__atomic_exchange_n(&r->claimed, 1, __ATOMIC_ACQ_REL)) {
    r->code = info ? info->si_code : 0;
    r->addr = info ? info->si_addr : NULL;
    r->pc = cpu_guard_pc(context);
    r->signal = sig;
  }
  _exit(CPU_GUARD_FAULT_EXIT);
}

#ifdef __GLIBC__
/* A kernel that calls exit in the child: out at once, with its status, before the session's
 * exit handlers (LeakSanitizer's check, stdio's buffers written a second time). */
static void cpu_guard_on_exit(int status, void *arg)
{
  (void)arg;
  _exit(status);
}
#endif

/* A stack for the handlers of the calling thread (a kernel may overflow its own). */
static int cpu_guard_altstack(void)
{
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_size = CPU_GUARD_ALTSTACK;
  ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return ss.ss_sp != MAP_FAILED && !sigaltstack(&ss, NULL);
}

/* The kernel and its OpenMP threads in the child. */
typedef struct cpu_guard_job {
  cpu_launcher fn;
  void **args;
  int threads; /* the team the launch would have here */
} cpu_guard_job;

/* The child's runner: a thread of the child's own, so its OpenMP team is a new pool of
 * threads (the forking thread's pool is the parent's, whose threads the child has not). */
static void *cpu_guard_run(void *arg)
{
  cpu_guard_job *job = arg;
  cpu_guard_altstack();
  omp_set_num_threads(job->threads);
  job->fn(job->args);
  return NULL;
}

/* The child: handlers on a stack of their own, the kernel on as many threads as the launch
 * would have had here, the verdict. */
static void cpu_guard_child(cpu_launcher fn, void **args, int threads, cpu_guard_record *rec)
{
  cpu_guard_child_record = rec;
  signal(SIGINT, SIG_IGN); /* Ctrl-C is the parent's: it kills the child */
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none); /* no core file of the whole session from a fault */
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) { /* out of memory (its copies of written pages), the child goes first */
    ssize_t w = write(fd, "1000", 4);
    (void)w;
    close(fd);
  }
  cpu_guard_altstack();
  struct sigaction sa; /* SA_ONSTACK: a thread without its own stack for them uses its stack */
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = cpu_guard_on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigfillset(&sa.sa_mask);
  sigset_t faults;
  sigemptyset(&faults);
  for (int i = 0; i < CPU_GUARD_NSIGNALS; i++) {
    sigaction(cpu_guard_signals[i], &sa, NULL);
    sigaddset(&faults, cpu_guard_signals[i]);
  }
  sigprocmask(SIG_UNBLOCK, &faults, NULL);
#ifdef __GLIBC__
  on_exit(cpu_guard_on_exit, NULL); /* registered last, run first */
#endif
  cpu_guard_job job = {.fn = fn, .args = args, .threads = threads};
  pthread_attr_t attr;
  pthread_t runner;
  size_t stack = 0;
  int made = 0;
  if (threads > 1 && !pthread_attr_init(&attr)) {
    pthread_attr_t mine; /* the runner gets the stack of the thread that launched */
    if (!pthread_getattr_np(pthread_self(), &mine)) {
      if (!pthread_attr_getstacksize(&mine, &stack) && stack)
        pthread_attr_setstacksize(&attr, stack);
      pthread_attr_destroy(&mine);
    }
    made = !pthread_create(&runner, &attr, cpu_guard_run, &job);
    pthread_attr_destroy(&attr);
  }
  if (made) pthread_join(runner, NULL);
  else { /* this thread, alone: a team of one starts none of the parent's threads */
    omp_set_num_threads(1);
    fn(args);
  }
  rec->done = 1;
  _exit(0);
}

void cpu_guard_trial(cpu_launcher fn, void **args, int threads, cpu_trial *t)
{
  memset(t, 0, sizeof *t);
  t->outcome = CPU_TRIAL_UNAVAILABLE;
  cpu_guard_record *rec =
      mmap(NULL, sizeof *rec, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (rec == MAP_FAILED) return;
  memset(rec, 0, sizeof *rec);
  int fds[2]; /* the child holds the write end: its end, however it comes, closes it */
  if (pipe2(fds, O_CLOEXEC)) {
    munmap(rec, sizeof *rec);
    return;
  }
  fflush(stdout); /* what is buffered is printed once, never again by a child that prints */
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    cpu_guard_child(fn, args, threads, rec);
  }
  close(fds[1]);
  if (pid < 0) { /* no memory or no process left for a copy: run as before, unguarded */
    close(fds[0]);
    munmap(rec, sizeof *rec);
    return;
  }
  int interrupted = 0;
  for (;;) {
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    int r = poll(&p, 1, CPU_GUARD_POLL_MS);
    if (r > 0 || (r < 0 && errno != EINTR)) break;
    if (fe_interrupt_flag) {
      kill(pid, SIGKILL);
      interrupted = 1;
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  pid_t w;
  do w = waitpid(pid, &status, 0);
  while (w < 0 && errno == EINTR);
  int reaped = w == pid;
  if (rec->signal) {
    t->outcome = CPU_TRIAL_FAULT;
    t->signal = rec->signal;
    t->code = rec->code;
    t->addr = rec->addr;
    t->pc = rec->pc;
  } else if (rec->done) {
    t->outcome = CPU_TRIAL_CLEAN;
  } else if (interrupted) {
    t->outcome = CPU_TRIAL_INTERRUPTED;
  } else if (reaped && WIFSIGNALED(status)) {
    t->signal = WTERMSIG(status);
    t->outcome = cpu_guard_is_fault(t->signal) ? CPU_TRIAL_FAULT : CPU_TRIAL_KILLED;
  } else if (reaped && WIFEXITED(status)) {
    t->outcome = CPU_TRIAL_EXIT;
    t->status = WEXITSTATUS(status);
  } else {
    t->outcome = CPU_TRIAL_KILLED; /* not reaped (SIGCHLD ignored) and no word from it */
  }
  munmap(rec, sizeof *rec);
}

/* A signal's name (SIGSEGV) into buf. */
static const char *cpu_guard_signal_name(int sig, char *buf, size_t n)
{
  static const struct {
    int sig;
    const char *name;
  } names[] = {{SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGILL, "SIGILL"},
               {SIGFPE, "SIGFPE"},   {SIGABRT, "SIGABRT"}, {SIGTRAP, "SIGTRAP"},
               {SIGSYS, "SIGSYS"},   {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].sig == sig) return names[i].name;
  snprintf(buf, n, "signal %d", sig);
  return buf;
}

void cpu_guard_describe(const cpu_trial *t, char *buf, size_t n)
{
  char name[32];
  const char *s = cpu_guard_signal_name(t->signal, name, sizeof name);
  switch (t->outcome) {
  case CPU_TRIAL_FAULT:
    switch (t->signal) {
    case SIGSEGV:
      snprintf(buf, n, "SIGSEGV, a read or write of memory it may not touch (address %p%s)",
               t->addr, t->code == SEGV_MAPERR   ? ", not mapped"
               : t->code == SEGV_ACCERR ? ", not writable or not readable"
                                        : "");
      break;
    case SIGBUS:
      snprintf(buf, n, "SIGBUS, a bus error (address %p: misaligned, or past the end of a "
                       "mapped file)", t->addr);
      break;
    case SIGILL:
      snprintf(buf, n, "SIGILL, an illegal instruction (the compiler puts a trap where the code "
                       "is certain to fail, such as an integer division by a constant zero)");
      break;
    case SIGFPE:
      snprintf(buf, n, "SIGFPE, an arithmetic exception (%s)",
               t->code == FPE_INTDIV   ? "an integer division by zero"
               : t->code == FPE_INTOVF ? "an integer overflow"
                                       : "integer or floating-point");
      break;
    case SIGABRT: snprintf(buf, n, "SIGABRT (abort, or an assert that failed)"); break;
    default: snprintf(buf, n, "%s", s); break;
    }
    break;
  case CPU_TRIAL_EXIT:
    snprintf(buf, n, "an exit of its own (status %d): it ended the process it ran in", t->status);
    break;
  case CPU_TRIAL_KILLED: snprintf(buf, n, "%s, sent from outside", s); break;
  case CPU_TRIAL_INTERRUPTED: snprintf(buf, n, "Ctrl-C"); break;
  default: snprintf(buf, n, "nothing: it returned"); break;
  }
}

/* The line of base.c that holds the instruction at offset off of base.so: the source
 * compiled once more with -g (the same instructions, a line table beside them) and asked of
 * addr2line; 0 when either is missing or fails. */
static int cpu_guard_line(const char *cc, const char *flags, const char *base, uintptr_t off)
{
  char so[1200], cmd[4400], out[1400];
  snprintf(so, sizeof so, "%.1099s.%d.g.so", base, (int)getpid());
  snprintf(cmd, sizeof cmd, "%.255s %.255s -g1 -o '%s' '%.1099s.c' > /dev/null 2>&1", cc, flags, so,
           base);
  int line = 0;
  if (system(cmd) == 0) {
    snprintf(cmd, sizeof cmd, "addr2line -e '%s' 0x%llx 2> /dev/null", so, (unsigned long long)off);
    FILE *p = popen(cmd, "r");
    if (p && fgets(out, sizeof out, p)) { /* "path:line" or "path:line (discriminator k)" */
      out[strcspn(out, " \n")] = '\0';
      char *colon = strrchr(out, ':');
      if (colon) line = atoi(colon + 1);
    }
    if (p) pclose(p);
  }
  remove(so);
  return line;
}

static int cpu_guard_name_char(char c)
{
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Line `line` of file path (trimmed) into text, and the function it is in into fn (the last
 * line before it that starts a definition at column 0). */
static void cpu_guard_source_line(const char *path, int line, char *text, size_t nt, char *fn,
                                  size_t nf)
{
  text[0] = fn[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  char *buf = NULL;
  size_t cap = 0;
  for (int i = 1; i <= line && getline(&buf, &cap, f) > 0; i++) {
    const char *p = buf, *open = strchr(buf, '(');
    if (i == line) {
      p += strspn(p, " \t");
      snprintf(text, nt, "%.*s", (int)strcspn(p, "\n"), p);
      break;
    }
    if (!open || strchr(" \t#/}", buf[0])) continue; /* not a definition's first line */
    if (!strncmp(p, "FE_KERNEL(", 10)) {
      p += 10;
      snprintf(fn, nf, "%.*s", (int)strcspn(p, ")"), p);
      continue;
    }
    /* the name before a parenthesis, not an attribute's */
    for (; open; open = strchr(open + 1, '(')) {
      const char *end = open, *start;
      while (end > buf && end[-1] == ' ') end--;
      for (start = end; start > buf && cpu_guard_name_char(start[-1]); start--) {
      }
      if (end > start && strncmp(start, "__attribute__", 13) && strncmp(start, "visibility", 10)) {
        snprintf(fn, nf, "%.*s", (int)(end - start), start);
        break;
      }
    }
  }
  free(buf);
  fclose(f);
}

void cpu_guard_locate(const char *cc, const char *flags, const char *base, void *pc, char *buf,
                      size_t n)
{
  buf[0] = '\0';
  if (!pc) return;
  Dl_info info;
  if (!dladdr(pc, &info) || !info.dli_fname) {
    snprintf(buf, n, "at %p, in no loaded object", pc);
    return;
  }
  char so[1200];
  snprintf(so, sizeof so, "%.1099s.so", base);
  if (strcmp(info.dli_fname, so)) { /* in a library the kernel called */
    const char *lib = strrchr(info.dli_fname, '/');
    snprintf(buf, n, "in %s%s%s, called from the kernel", lib ? lib + 1 : info.dli_fname,
             info.dli_sname ? ", function " : "", info.dli_sname ? info.dli_sname : "");
    return;
  }
  uintptr_t off = (uintptr_t)pc - (uintptr_t)info.dli_fbase;
  int line = cpu_guard_line(cc, flags, base, off);
  if (line <= 0) {
    snprintf(buf, n, "at offset 0x%llx of %s (its source: %.1099s.c)", (unsigned long long)off, so,
             base);
    return;
  }
  char path[1200], text[200], fn[64];
  snprintf(path, sizeof path, "%.1099s.c", base);
  cpu_guard_source_line(path, line, text, sizeof text, fn, sizeof fn);
  const char *what = !strcmp(fn, "fe_f")    ? " (the physics' residual)"
                     : !strcmp(fn, "fe_df") ? " (the physics' Jacobian action)"
                                            : "";
  snprintf(buf, n, "at %s:%d%s%s%s%s%s%s", path, line, fn[0] ? ", in " : "", fn, what,
           text[0] ? ": `" : "", text, text[0] ? "`" : "");
}
