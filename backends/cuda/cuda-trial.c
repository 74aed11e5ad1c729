/* felab cuda backend: a kernel's trial run in another process.
 *
 * A kernel that reads a bad address on the GPU leaves a sticky error in its context: every
 * later call in the process fails, and NVIDIA's driver gives no way to clear it short of
 * ending the process. So the first launch of a kernel compiled from C a user typed (its
 * source defines FE_USER_C: raw physics bodies, coefficient strings beyond the host's reader,
 * engine/physics/expr.h's fe_c_expression_safe) runs first in a child,
 * `felab --cuda-trial`, with a context of its own. The child maps each of the launch's
 * buffers through CUDA's interprocess handles, copies it (the trial's writes never reach
 * the session's data, and a kernel that adds into its output runs once here afterwards as
 * if it had not run before), launches the same image with the same arguments and waits. A
 * fault ends the child's context only: the kernel is refused with the driver's reason,
 * now and at every later launch, and the session's context goes on.
 *
 * No verdict (interprocess handles unsupported, the copies do not fit the device's free
 * memory, the child could not start) lets the kernel run here, untried, with one line on
 * stderr: the guard is a safety net, not a condition for running. Ctrl-C while the child
 * runs kills it. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/cuda/cuda-backend.h"
#include "engine/core/error.h"
#include "engine/core/strbuf.h"

extern char **environ;

#define TRIAL_MAGIC "felabCT1"
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES_ 8

/* The request: this header, nargs trial_arg records, then the image's bytes. */
typedef struct trial_request {
  char magic[8];
  int device;   /* ordinal */
  int nargs;
  unsigned grid, block, shared;
  char name[64];
  unsigned long long image_size;
} trial_request;

typedef struct trial_arg {
  char kind;               /* 'p' a pointer into allocation `alloc`, 'i', 'd' or 'f' */
  int alloc;               /* index of the allocation's first argument (shared handles) */
  CUipcMemHandle handle;   /* the allocation ('p') */
  unsigned long long offset, size; /* of the pointer in its allocation, and the allocation's */
  int i;
  double d;
  float f;
} trial_arg;

/* The reply: how far the child got and the driver's result there. */
typedef enum {
  TRIAL_STAGE_SETUP, /* driver, context, module, mapping, copies: no verdict on the kernel */
  TRIAL_STAGE_RUN,   /* launch and wait: the kernel's own verdict */
} trial_stage;

typedef struct trial_reply {
  int stage;
  int result; /* CUresult */
  char text[256];
} trial_reply;

/* ---- both sides: whole reads and writes on a pipe ---- */

static int write_all(int fd, const void *p, size_t n)
{
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n)
{
  char *c = p;
  while (n) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

/* ---- the child ---- */

static int serve_reply(int stage, CUresult result, const cuda_api *api, const char *what)
{
  trial_reply r = {stage, result, ""};
  char text[200];
  snprintf(r.text, sizeof r.text, "%s: %s", what, cuda_error_text(api, result, text, sizeof text));
  return write_all(STDOUT_FILENO, &r, sizeof r) ? 1 : 0;
}

int fe_cuda_trial_serve(void)
{
  static cuda_api api;
  trial_request q;
  trial_arg a[CUDA_MAX_ARGS];
  CUdeviceptr base[CUDA_MAX_ARGS] = {0}, copy[CUDA_MAX_ARGS] = {0}, ptr[CUDA_MAX_ARGS];
  void *params[CUDA_MAX_ARGS];
  signal(SIGPIPE, SIG_IGN);
  if (read_all(STDIN_FILENO, &q, sizeof q) || memcmp(q.magic, TRIAL_MAGIC, 8) || q.nargs < 0 ||
      q.nargs > CUDA_MAX_ARGS || q.image_size == 0 || q.image_size > (1ULL << 31) ||
      read_all(STDIN_FILENO, a, sizeof a[0] * (size_t)q.nargs)) {
    fprintf(stderr, "felab --cuda-trial: felab starts this itself, with a request on stdin\n");
    return 2;
  }
  q.name[sizeof q.name - 1] = '\0';
  char *image = malloc(q.image_size + 1);
  if (!image || read_all(STDIN_FILENO, image, q.image_size)) return 2;
  image[q.image_size] = '\0';
  if (cuda_api_load(&api)) {
    trial_reply r = {TRIAL_STAGE_SETUP, -1, ""};
    snprintf(r.text, sizeof r.text, "%s", fe_error_message());
    return write_all(STDOUT_FILENO, &r, sizeof r) ? 1 : 0;
  }
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CUresult e = api.cuInit(0);
  if (e) return serve_reply(TRIAL_STAGE_SETUP, e, &api, "cuInit");
  if ((e = api.cuDeviceGet(&dev, q.device)) || (e = api.cuDevicePrimaryCtxRetain(&ctx, dev)) ||
      (e = api.cuCtxSetCurrent(ctx)))
    return serve_reply(TRIAL_STAGE_SETUP, e, &api, "a context");
  if ((e = api.cuModuleLoadDataEx(&mod, image, 0, NULL, NULL)))
    return serve_reply(TRIAL_STAGE_SETUP, e, &api, "loading the module");
  if ((e = api.cuModuleGetFunction(&fn, mod, q.name)))
    return serve_reply(TRIAL_STAGE_SETUP, e, &api, "finding the kernel");
  if (q.shared > 48 * 1024 &&
      (e = api.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES_,
                                  (int)q.shared)))
    return serve_reply(TRIAL_STAGE_SETUP, e, &api, "its shared memory");
  for (int i = 0; i < q.nargs; i++) {
    switch (a[i].kind) {
    case 'p': {
      int k = a[i].alloc;
      if (k < 0 || k > i || a[k].kind != 'p') return serve_reply(TRIAL_STAGE_SETUP, 1, &api, "request");
      if (k == i) {
        if ((e = api.cuIpcOpenMemHandle(&base[i], a[i].handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)))
          return serve_reply(TRIAL_STAGE_SETUP, e, &api, "mapping a buffer of the session");
        if ((e = api.cuMemAlloc(&copy[i], a[i].size)) ||
            (e = api.cuMemcpyDtoD(copy[i], base[i], a[i].size)))
          return serve_reply(TRIAL_STAGE_SETUP, e, &api, "copying a buffer");
        api.cuIpcCloseMemHandle(base[i]);
      }
      ptr[i] = copy[k] + a[i].offset;
      params[i] = &ptr[i];
      break;
    }
    case 'i': params[i] = &a[i].i; break;
    case 'd': params[i] = &a[i].d; break;
    case 'f': params[i] = &a[i].f; break;
    default: return serve_reply(TRIAL_STAGE_SETUP, 1, &api, "request");
    }
  }
  e = api.cuLaunchKernel(fn, q.grid, 1, 1, q.block, 1, 1, q.shared, NULL, params, NULL);
  if (!e) e = api.cuCtxSynchronize();
  return serve_reply(TRIAL_STAGE_RUN, e, &api, "the trial run");
}

/* ---- the session ---- */

typedef enum { TRIAL_CLEAN, TRIAL_FAULT, TRIAL_NO_VERDICT, TRIAL_INTERRUPTED } trial_outcome;

/* The request's argument records; NO_VERDICT (with why) where a buffer cannot be named. */
static trial_outcome trial_args(cuda_impl *cu, int nargs, const char *kinds, void *const *params,
                                fe_precision prec, trial_arg *a, size_t *bytes, char *why,
                                size_t nwhy)
{
  *bytes = 0;
  if (!cu->api.cuIpcGetMemHandle || !cu->api.cuIpcOpenMemHandle || !cu->api.cuMemGetAddressRange) {
    snprintf(why, nwhy, "this driver has no interprocess memory handles");
    return TRIAL_NO_VERDICT;
  }
  for (int i = 0; i < nargs; i++) {
    memset(&a[i], 0, sizeof a[i]);
    a[i].kind = kinds[i];
    if (kinds[i] == 'i') a[i].i = *(const int *)params[i];
    if (kinds[i] == 'r' && prec == FE_FLOAT) a[i].kind = 'f', a[i].f = *(const float *)params[i];
    if (kinds[i] == 'r' && prec != FE_FLOAT) a[i].kind = 'd', a[i].d = *(const double *)params[i];
    if (kinds[i] != 'p') continue;
    CUdeviceptr p = *(const CUdeviceptr *)params[i], base;
    size_t size;
    CUresult e = cu->api.cuMemGetAddressRange(&base, &size, p);
    a[i].alloc = i;
    for (int j = 0; j < i && !e; j++)
      if (a[j].kind == 'p' && a[j].alloc == j && *(const CUdeviceptr *)params[j] - a[j].offset == base)
        a[i].alloc = j;
    if (!e && a[i].alloc == i) {
      e = cu->api.cuIpcGetMemHandle(&a[i].handle, base);
      *bytes += size;
    }
    if (e) {
      char text[160];
      snprintf(why, nwhy, "a buffer cannot be shared with another process: %s",
               cuda_error_text(&cu->api, e, text, sizeof text));
      return TRIAL_NO_VERDICT;
    }
    a[i].offset = p - base;
    a[i].size = size;
  }
  return TRIAL_CLEAN;
}

/* Start `felab --cuda-trial` with pipes on its stdin and stdout. */
static int trial_spawn(pid_t *pid, int *to, int *from)
{
  int in[2], out[2];
  if (pipe(in)) return -1;
  if (pipe(out)) {
    close(in[0]), close(in[1]);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  char *argv[] = {"felab", "--cuda-trial", NULL};
  int rc = posix_spawn(pid, "/proc/self/exe", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc) {
    close(in[1]), close(out[0]);
    return -1;
  }
  *to = in[1];
  *from = out[0];
  return 0;
}

/* Wait for the reply; Ctrl-C kills the child. */
static trial_outcome trial_wait(pid_t pid, int from, trial_reply *r)
{
  struct pollfd p = {from, POLLIN, 0};
  for (;;) {
    if (fe_interrupt_flag) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      return TRIAL_INTERRUPTED;
    }
    int n = poll(&p, 1, 100);
    if (n < 0 && errno != EINTR) break;
    if (n > 0) break;
  }
  int got = !read_all(from, r, sizeof *r);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!got) {
    snprintf(r->text, sizeof r->text, "the trial process ended without a word (%s %d)",
             WIFSIGNALED(status) ? "signal" : "status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return TRIAL_NO_VERDICT;
  }
  r->text[sizeof r->text - 1] = '\0';
  if (r->stage == TRIAL_STAGE_RUN) return r->result ? TRIAL_FAULT : TRIAL_CLEAN;
  return TRIAL_NO_VERDICT;
}

/* One trial: the request, the child, its verdict (the reply's text says what it met). */
static trial_outcome trial_run(cuda_impl *cu, fe_kernel *k, unsigned grid, unsigned block,
                               int nargs, void *const *params, fe_precision prec, trial_reply *r)
{
  trial_request q;
  trial_arg a[CUDA_MAX_ARGS];
  size_t bytes, free_bytes = 0, total = 0;
  memset(r, 0, sizeof *r);
  memset(&q, 0, sizeof q);
  trial_outcome o = trial_args(cu, nargs, k->sig->kinds, params, prec, a, &bytes, r->text,
                               sizeof r->text);
  if (o != TRIAL_CLEAN) return o;
  if (!cu->api.cuMemGetInfo(&free_bytes, &total) && bytes + (64u << 20) > free_bytes) {
    snprintf(r->text, sizeof r->text, "copies of its buffers (%zu bytes) do not fit the %zu bytes "
             "free on the device", bytes, free_bytes);
    return TRIAL_NO_VERDICT;
  }
  memcpy(q.magic, TRIAL_MAGIC, 8);
  q.device = (int)cu->device;
  q.nargs = nargs;
  q.grid = grid;
  q.block = block;
  q.shared = k->shared;
  snprintf(q.name, sizeof q.name, "%s", k->name);
  q.image_size = k->mod->trial_size;
  pid_t pid;
  int to, from;
  if (trial_spawn(&pid, &to, &from)) {
    snprintf(r->text, sizeof r->text, "no trial process could be started: %s", strerror(errno));
    return TRIAL_NO_VERDICT;
  }
  void (*old)(int) = signal(SIGPIPE, SIG_IGN);
  int sent = !write_all(to, &q, sizeof q) && !write_all(to, a, sizeof a[0] * (size_t)nargs) &&
             !write_all(to, k->mod->trial_image, k->mod->trial_size);
  close(to);
  signal(SIGPIPE, old);
  o = trial_wait(pid, from, r);
  close(from);
  if (!sent && o == TRIAL_NO_VERDICT)
    snprintf(r->text, sizeof r->text, "the trial process did not take its request");
  return o;
}

int cuda_kernel_vet(cuda_impl *cu, fe_kernel *k, unsigned grid, unsigned block, int nargs,
                    void *const *params, fe_precision prec)
{
  if (k->trust < 0) FE_ERROR(FE_ERR_BACKEND, "%s", k->fault);
  if (k->trust > 0 || !k->mod || !k->mod->trial_image) return 0;
  CUresult e = cu->api.cuCtxSynchronize(); /* the buffers as the launch would find them */
  if (e) return cuda_fail(cu, e, "waiting before a trial run");
  trial_reply r;
  trial_outcome o = trial_run(cu, k, grid, block, nargs, params, prec, &r);
  if (o == TRIAL_INTERRUPTED) {
    FE_CHECK(fe_interrupt_check());
    FE_ERROR(FE_ERR_INTERRUPTED, "interrupted");
  }
  if (o == TRIAL_NO_VERDICT) {
    static int said;
    if (!said++)
      fprintf(stderr, "felab: cuda: kernel %s runs untried (a kernel of C typed by a user is "
              "tried in another process first): %s\n", k->name, r.text);
    k->trust = 1;
    return 0;
  }
  if (o == TRIAL_CLEAN) {
    k->trust = 1;
    return 0;
  }
  fe_strbuf b = {0};
  fe_strbuf_printf(&b, "CUDA kernel %s (C typed by a user: a raw physics body or a coefficient) "
                   "faulted on its first run, tried in another process on %s: %s. The session "
                   "and its CUDA context go on; this kernel will not run in it again",
                   k->name, cu->info.name, r.text);
  FE_CHECK(fe_strbuf_finish(&b, &k->fault));
  k->trust = -1;
  FE_ERROR(FE_ERR_BACKEND, "%s", k->fault);
}
