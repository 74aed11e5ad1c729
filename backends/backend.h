/* felab backends: one table of functions per place to compute (cpu, opencl, cuda).
 * The engine talks to a backend only through this table; a backend never knows about Lua
 * or about finite elements. Kernel source arrives as one string written in the portable
 * dialect (see docs/kernels.md): the backend's preamble maps the dialect's macros. */
#ifndef FE_BACKEND_H
#define FE_BACKEND_H

#include <stddef.h>

typedef enum { FE_DOUBLE = 0, FE_FLOAT = 1 } fe_precision;
#define FE_NPRECISIONS 2

/* A block of memory on the backend: a host pointer (cpu), a cl_mem (opencl), a
 * CUdeviceptr (cuda). The engine never dereferences ptr unless the backend is cpu. */
typedef struct fe_buffer {
  void *ptr;    /* backend handle */
  size_t bytes; /* size of the allocation */
} fe_buffer;

/* The partial sums of an apply's element quadratic forms (backend.h's cg_parts), a slot of
 * FE_PQ_PARTS x FE_PQ_STRIDE doubles: on cuda a group adds its sum into part
 * (group % FE_PQ_PARTS), FE_PQ_STRIDE doubles apart; the cpu lays its threads' sums out in
 * the slot its own way (backends/cpu/cpu-backend.h). */
#define FE_PQ_PARTS 64
#define FE_PQ_STRIDE 32

enum { FE_CG_PQ_READ, FE_CG_PQ_PUT, FE_CG_SUMS_PUT, FE_CG_PQ_NODE, FE_CG_SUMS_NODE }; /* cg_split */

/* A sum over the ranks of one machine on their devices (cg_split's FE_CG_*_NODE), through
 * mailboxes each rank's device writes into the others' (engine/parallel/exchange.c). */
enum { FE_NODE_RANKS = 8 }; /* ranks at most */
typedef struct fe_node_sum {
  const fe_buffer *box;   /* this rank's mailbox: 2 kinds x size ranks x 4 doubles */
  const fe_buffer *peers; /* the ranks' mailboxes' device addresses, size of them (64-bit) */
  int rank, size;
  double seq;             /* this sum's number, every rank's the same (1, 2, ...) */
  const fe_buffer *corr;  /* the group sums to take off first (the entries another rank owns:
                           * value i's at [i ncorr, (i + 1) ncorr)), or NULL */
  int ncorr;
  fe_precision corr_prec;
} fe_node_sum;

/* backend.h's mark: its slots, and those a split space's apply uses (its boundary cells
 * integrated; their shares gathered for the neighbours) */
enum { FE_MARKS = 4, FE_MARK_CELLS = 0, FE_MARK_GATHERED = 1 };

typedef struct fe_module fe_module; /* a compiled program, backend-specific */
typedef struct fe_kernel fe_kernel; /* one entry point of a module */

typedef enum { FE_ARG_BUFFER, FE_ARG_INT, FE_ARG_REAL } fe_arg_kind;

/* One kernel argument. FE_ARG_REAL is passed as the kernel's real type (float or double,
 * from the precision given to launch). */
typedef struct fe_arg {
  fe_arg_kind kind;
  const fe_buffer *buf; /* FE_ARG_BUFFER */
  long long i;          /* FE_ARG_INT, passed as a C int */
  double r;             /* FE_ARG_REAL */
} fe_arg;

typedef struct fe_device_info {
  char name[128];      /* device name as the driver reports it */
  char vendor[64];     /* vendor or platform */
  int is_gpu;          /* 1 for a GPU, 0 for a CPU device */
  int compute_units;   /* cores, SMs, or OpenCL compute units */
  size_t global_mem;   /* bytes */
  size_t local_mem;    /* bytes of shared/local memory per work group */
  size_t local_mem_optin; /* more a kernel may opt into (kernel_shared), else 0 */
  size_t max_group;    /* largest work-group size */
  int fp64;            /* double precision supported */
  int fp64_atomics;    /* native or emulated atomic add on doubles */
  int device_index;    /* the device's index among its driver's (cuda's ordinal; 0 elsewhere) */
  long long share_key; /* the device among its machine's: ranks of one machine whose keys match
                        * run on the same one (fe_backend's sharers). cuda: its PCI domain, bus
                        * and device, plus one; an OpenCL GPU: its index plus one; a CPU device:
                        * 0, the machine's cores */
  int node_sums;       /* cg_split sums over a machine's ranks on their devices (FE_CG_*_NODE) */
  int lazy_launch;     /* a kernel's first launch may do one-time work worth seconds (OpenCL:
                        * PoCL compiles there), so an action times its second run */
  /* what bounds how many groups a compute unit holds at once (0: not known) */
  int warp;            /* threads issued together (32 on NVIDIA; 1 on the cpu) */
  int threads_per_cu;  /* resident threads per compute unit */
  int regs_per_cu;     /* 32-bit registers per compute unit */
  int groups_per_cu;   /* resident work groups per compute unit */
  size_t shared_per_cu; /* bytes of shared memory per compute unit */
  size_t l2_bytes;     /* last-level cache */
  size_t l1_bytes;     /* the cpu: a core's L1 data cache, where a group's arrays live (0: not known) */
  int vector_bytes[FE_NPRECISIONS]; /* the cpu: the SIMD registers its kernels are compiled
                        * for, bytes, by precision (0: GPUs) */
  size_t llc_bytes;    /* the cpu: the last-level cache its cores share, where a call finds again
                        * what the call before left (0: not known) */
  int clock_mhz;       /* core clock */
  int tables_l1;       /* the kernels' constant tables live in global memory and are read
                        * through L1, one wavefront per 128-byte line a warp touches (CUDA's
                        * __device__ const); else a constant cache serves them word by word */
  /* What the engine asks for where it once tested a backend's name; each backend sets them
   * where it fills this info (cpu_query, cuda_describe, opencl_describe), 0 unless set. */
  int items_in_order;  /* a group's items run one after another on one host thread (the
                        * kernels' FE_CPU paths): groups of one color may scatter with plain adds
                        * and a cell's items reuse what the one before made. cpu 1; cuda and
                        * OpenCL 0 (PoCL too: its compiler may run a group's items side by side) */
  int cells_in_lanes;  /* the compiler's SIMD lanes are a group's cells (its loops over them
                        * vectorized; per-point data are read cells fastest). cpu 1; cuda and
                        * OpenCL 0 (their lanes are items; PoCL vectorizes the items) */
  size_t stack_shared; /* a group's shared arrays are locals on one thread's stack, which bounds
                        * them to this many bytes (cpu: 512 KB); 0: local_mem bounds them */
  int large_local;     /* the compiler builds groups whose local arrays take over 100 KB a cell
                        * (sumfact past 12 points per direction). cpu and cuda 1; OpenCL 0: PoCL
                        * crashed on one (a segmentation fault), NVIDIA's OpenCL is untried */
  int fp64_mma;        /* FP64 matrix units the kernels reach (tensor cores, inline PTX
                        * mma.m8n8k4.f64): cuda on sm_80 and later; 0 elsewhere (OpenCL too) */
  int measured_defaults; /* the strategies' defaults measured with cuda on NVIDIA's GPUs
                        * (docs/benchmarks.md) hold here: cuda 1; 0 elsewhere, NVIDIA's OpenCL
                        * included (its compiler was never measured) */
  size_t constant_tables; /* the bytes a program's __constant tables may take (OpenCL on a GPU:
                        * its constant memory, 64 KB on NVIDIA's, past which its compiler
                        * fails); 0: no bound (cuda's tables are global memory, a CPU's plain) */
  int cpu_calibration; /* device.calibrate measures the host CPU's own ceilings too: the SIMD
                        * rate against the lanes, llvm-mca's cycle, a sparse matrix's rows
                        * (calibrate.knl's FE_CPU kernels). cpu 1; cuda and OpenCL 0 (PoCL too) */
  int walks_rolled;    /* the kernels keep a column's walk over its points a loop (cuda's
                        * `unroll 1`, sumfact.knl's SF_WALK): a point's stored words are a load
                        * issued after the point before's work, each a trip to memory. cuda 1;
                        * cpu 0 (unrolled), OpenCL 0 (its compiler's choice) */
  int synchronous;     /* every call returns with its work done, CG's steps included: CG reads a
                        * step's scalars before it starts the next apply (none runs past the
                        * last step). cpu 1; cuda 0 (its steps are queued); OpenCL 0 */
  int follows;         /* the backend's follow takes effect (fe_backend_ops.follow): cuda on
                        * sm_90 and later with a driver that has cuLaunchKernelEx; 0 elsewhere */
} fe_device_info;

/* What a compiled kernel needs of a compute unit (backend.kernel_resources); 0: not known. */
typedef struct fe_kernel_resources {
  int regs;            /* 32-bit registers per thread */
  size_t shared;       /* bytes of shared memory per group: static, plus dynamic opted in */
  size_t private_bytes; /* per-thread local (spilled) memory */
  int max_threads;     /* the most threads per group it can be launched with */
  /* the cpu: llvm-mca's cycles an iteration of the kernel's hot loop (the innermost loop of
   * its compiled code with the most floating-point instructions), repeated in its model of
   * the core (0: not simulated, llvm-mca absent) */
  double loop_cycles;
} fe_kernel_resources;

typedef enum { FE_REDUCE_SUM, FE_REDUCE_MIN, FE_REDUCE_MAX } fe_reduce_op;

/* The table. impl is the backend's private state, made by open. Every int-returning slot
 * returns 0 or an fe_err code after setting a message (engine/core/error.h). */
enum { FE_SIDE_BEGIN, FE_SIDE_END, FE_SIDE_JOIN, FE_SIDE_RESUME }; /* fe_backend_ops.side */

typedef struct fe_backend_ops {
  const char *name;
  /* Open device `device` (0 for the default). On failure returns FE_ERR_UNAVAILABLE with
   * the reason as the error message (e.g. "no OpenCL platform found: install pocl"). */
  int (*open)(int device, void **impl);
  void (*close)(void *impl);
  int (*query)(void *impl, fe_device_info *info);

  /* memory */
  int (*alloc)(void *impl, size_t bytes, fe_buffer *buf);
  void (*release)(void *impl, fe_buffer *buf);
  int (*write)(void *impl, fe_buffer *dst, size_t offset, size_t bytes, const void *host);
  int (*read)(void *impl, const fe_buffer *src, size_t offset, size_t bytes, void *host);
  int (*copy)(void *impl, fe_buffer *dst, const fe_buffer *src, size_t bytes);
  /* Optional: the buffer's contents in host memory, readable in place (the cpu), or NULL. */
  void *(*host)(void *impl, const fe_buffer *buf);
  /* Optional (the cpu; NULL elsewhere): a buffer that is the host memory [host, host + bytes)
   * itself, no copy. The caller keeps that memory alive while the buffer is in use and never
   * releases the buffer. */
  int (*wrap)(void *impl, void *host, size_t bytes, fe_buffer *buf);
  /* Optional (cuda; NULL elsewhere: malloc and free serve): host memory that read and write
   * copy at the link's full rate (page-locked), for small buffers that cross at every call (a
   * split space's exchange); NULL where none is left. */
  void *(*host_alloc)(void *impl, size_t bytes);
  void (*host_free)(void *impl, void *host);
  /* Optional (cuda; NULL elsewhere): bytes of src from src_offset to dst at dst_offset, in the
   * current queue's order (the side queue's between side's BEGIN or RESUME and END; not
   * waited for). */
  int (*copy_async)(void *impl, fe_buffer *dst, size_t dst_offset, const fe_buffer *src,
                    size_t src_offset, size_t bytes);
  /* Optional (cuda; NULL elsewhere): a buffer named for another process of this machine
   * (export: its 64-byte handle), that process's buffer opened here by its handle (import:
   * peer, `bytes` long, readable by copy_async as a source; ipc_close releases it). */
  int (*ipc_export)(void *impl, const fe_buffer *buf, unsigned char handle[64]);
  int (*ipc_import)(void *impl, const unsigned char handle[64], size_t bytes, fe_buffer *peer);
  void (*ipc_close)(void *impl, fe_buffer *peer);

  /* kernels: the dialect preamble for a precision, compile (cached), look up, launch */
  const char *(*preamble)(void *impl, fe_precision prec);
  int (*compile)(void *impl, const char *source, fe_module **mod, double *seconds, int *cached);
  /* Optional (cuda; NULL elsewhere): compile the n sources that are not in the backend's
   * caches yet side by side, on the host's threads, into those caches, so that compile then
   * finds them; *seconds: the wall time; returns how many it compiled. A failure is not
   * reported here: compile meets it again and says what it is. */
  int (*precompile)(void *impl, const char *const *sources, int n, double *seconds);
  void (*module_free)(void *impl, fe_module *mod);
  int (*kernel)(void *impl, fe_module *mod, const char *name, fe_kernel **k);
  /* Launch ngroups work groups of group_size threads each (the cpu backend runs the
   * groups on OpenMP threads and ignores group_size). With seconds, blocks until done and
   * *seconds gets the kernel's own time (events on GPUs); with seconds NULL cuda returns at
   * once, and a failure shows at the next finish (opencl still waits). */
  int (*launch)(void *impl, fe_kernel *k, size_t ngroups, size_t group_size, int nargs,
                const fe_arg *args, fe_precision prec, double *seconds);
  /* Optional (NULL: none): launches of k get bytes of dynamic shared memory, up to
   * info.local_mem_optin (the kernel declares it `extern`). */
  int (*kernel_shared)(void *impl, fe_kernel *k, size_t bytes);
  /* Optional (NULL: groups are not handed out to threads by the host): the launches of colored
   * kernels (FE_COLORED) from this thread hand a thread runs of `run` consecutive groups of the
   * list; groups of one run may share nodes, groups of two runs of a color may not. */
  void (*group_runs)(void *impl, int run);
  /* Optional (NULL: not known): what k needs per thread and per group, from the compiled
   * kernel (cuFuncGetAttribute, clGetKernelWorkGroupInfo), for the model's occupancy. */
  int (*kernel_resources)(void *impl, fe_kernel *k, fe_kernel_resources *res);
  int (*finish)(void *impl);
  /* Optional (NULL: finish waits instead): a point of the queue (slot 0 .. FE_MARKS - 1,
   * after what is queued so far), and the host's wait for that point alone, the work queued
   * after it running on (a split space's exchange: its shares gathered, the interior cells'
   * kernel already queued behind them). */
  int (*mark)(void *impl, int slot);
  int (*mark_wait)(void *impl, int slot);
  /* Optional (NULL: one queue, in order): a second queue, for a chain of small launches that
   * may run beside the main queue's work (two-scale's coarse cycle beside its fine kernel).
   * FE_SIDE_BEGIN: what is queued next goes to the side queue, after everything the main one
   * holds; FE_SIDE_END: back to the main queue (the side's work goes on); FE_SIDE_JOIN: what
   * the main queue holds next waits for everything the side queue holds; FE_SIDE_RESUME: what
   * is queued next goes to the side queue again, after what it holds, without waiting for the
   * main queue (ended by END as after BEGIN). Only launches, copy_async and vector work (no
   * reads or writes of buffers) between BEGIN (or RESUME) and END. */
  int (*side)(void *impl, int op);
  /* Optional (NULL: not needed): the next launch on the current queue follows the kernel queued
   * last on it closely. Its groups take their places as soon as that kernel's have all begun
   * (every kernel lets them: the dialect's FE_GROUPS_BEGIN) and wait at FE_PRIOR_WAIT until it
   * has ended and its writes are seen, rather than asking for places when it ends, behind the
   * groups of a kernel of another queue that fills the device (a split space's gather after
   * the boundary cells, beside the interior's kernel). Where the device can not (info.follows
   * 0) the next launch is an ordinary one. */
  int (*follow)(void *impl);

  /* vector work on n reals of precision prec; reductions accumulate in double */
  int (*fill)(void *impl, fe_buffer *x, size_t n, fe_precision prec, double value);
  /* y <- a x + b y */
  int (*axpby)(void *impl, fe_buffer *y, double a, const fe_buffer *x, double b, size_t n,
               fe_precision prec);
  /* z <- x .* y (divide = 0) or x ./ y (divide = 1) */
  int (*pointwise)(void *impl, fe_buffer *z, const fe_buffer *x, const fe_buffer *y, int divide,
                   size_t n, fe_precision prec);
  int (*dot)(void *impl, const fe_buffer *x, const fe_buffer *y, size_t n, fe_precision prec,
             double *result);
  int (*reduce)(void *impl, const fe_buffer *x, size_t n, fe_precision prec, fe_reduce_op op,
                double *result);
  /* Optional (NULL: the engine composes axpby, pointwise and dot). The update of one
   * preconditioned CG step in one pass: x <- x + alpha p, r <- r - alpha q, then with
   * z = r ./ d (z = r when d is NULL), never stored, *rr <- (r, r) and *rz <- (r, z) of the
   * updated r, both accumulated in double. */
  int (*cg_update)(void *impl, fe_buffer *x, fe_buffer *r, const fe_buffer *p,
                   const fe_buffer *q, const fe_buffer *d, double alpha, size_t n,
                   fe_precision prec, double *rr, double *rz);
  /* Optional (NULL: pointwise and axpby). CG's new direction in one pass:
   * p <- r ./ d + beta p (p <- r + beta p when d is NULL). */
  int (*cg_direction)(void *impl, fe_buffer *p, const fe_buffer *r, const fe_buffer *d,
                      double beta, size_t n, fe_precision prec);
  /* Optional, all five or none (NULL: CG's scalars go through the host at every step). CG
   * with its scalars on the device, so that no step waits for the host: cg_begin keeps
   * rz = (r, z) of the start in a state; for step it = 1, 2, ... cg_pq queues (p, q) into
   * the state, cg_step queues the update (alpha = rz / (p, q) read on the device; cg_update's
   * work), a copy of step it's (p, q), (r, r) and new (r, z) to the host, and the direction
   * (beta = new rz / old rz, cg_direction's work); cg_wait waits for that copy of step it
   * and returns the three, in double. cg_pq and cg_step return once their work is queued; a
   * failed launch shows at the next wait or finish. A synchronous backend (the cpu,
   * fe_device_info.synchronous) does the work in the call, its state a few doubles.
   * cg_step's half: 0 the whole step; 1 the update and the copy alone, 2 the direction alone
   * (a split space's loop puts the ranks' sums between them: cg_split); 3 the update alone,
   * without the copy (cg_split's FE_CG_SUMS_NODE makes it, after the node's sums). */
  int (*cg_begin)(void *impl, double rz, void **state);
  int (*cg_pq)(void *impl, void *state, const fe_buffer *p, const fe_buffer *q, size_t n,
               fe_precision prec, int it);
  int (*cg_step)(void *impl, void *state, fe_buffer *x, fe_buffer *r, fe_buffer *p,
                 const fe_buffer *q, const fe_buffer *d, size_t n, fe_precision prec, int it,
                 int half);
  int (*cg_wait)(void *impl, void *state, int it, double *pq, double *rr, double *rz);
  void (*cg_end)(void *impl, void *state);
  /* Optional (NULL: none), beside the five: step it's (p, q) from the apply itself. cg_parts
   * gives partial sums, zero by the time the step's apply runs (cuda: FE_PQ_PARTS doubles
   * FE_PQ_STRIDE apart, so that their atomic adds fall in different L2 slices; the cpu: a
   * line a thread, one writer each): their buffer in *parts and their place in *slot (the
   * sums start at slot FE_PQ_PARTS FE_PQ_STRIDE), for the apply to add its element quadratic
   * forms into (fe_action_opts.pq); cg_step of that step then sums them, in a fixed order,
   * for (p, q) (and zeroes them again), unless cg_pq was queued for the step after all.
   * parts->ptr left NULL: none for this step (cg_pq then). The kernels of a backend with
   * cg_parts add them: its dialect defines FE_PQ_SUM (engine/codegen/kernels/sumfact.knl). */
  int (*cg_parts)(void *impl, void *state, int it, fe_buffer *parts, int *slot);
  /* Optional (NULL: a split space's CG goes through the host), beside the five: the scalars
   * of a step of a space split over ranks (engine/solve/solver.c), which the host adds over
   * the ranks between the step's parts. what = FE_CG_PQ_READ: step it's (p, q) of this
   * rank's cells (its parts summed in their order, or cg_pq's), waited for, into v[0];
   * FE_CG_PQ_PUT: step it's (p, q) set to v[0] (the ranks' sum; the step's update reads it
   * and sums no parts, its direction still zeroes them), queued; FE_CG_SUMS_PUT: step it's
   * (r, r) and (r, z) set to v[0], v[1] after its update (half 1), before its direction
   * (half 2) reads them, queued. With a node's mailboxes (ns; fe_device_info.node_sums), the
   * sums themselves on the device, queued, the host waiting for nothing: FE_CG_PQ_NODE step
   * it's (p, q) made the ranks' sum in the queue before its update; FE_CG_SUMS_NODE its
   * (r, r) and (r, z) after its update, and the copy cg_wait reads made after that. */
  int (*cg_split)(void *impl, void *state, int it, int what, double *v, const fe_node_sum *ns);

  /* Optional (NULL: none): the vendor's sparse product on felab's CSR arrays (cuSPARSE on
   * cuda, opened at run time), the reference for felab's own products. sparse_make keeps
   * the library's descriptors in *state (the arrays are not copied); sparse_spmv: y <- M x,
   * timed as launch is; sparse_free releases the state. */
  int (*sparse_make)(void *impl, int n, long long nnz, const fe_buffer *rowptr,
                     const fe_buffer *cols, const fe_buffer *vals, fe_precision prec,
                     void **state);
  int (*sparse_spmv)(void *impl, void *state, const fe_buffer *x, fe_buffer *y, double *seconds);
  void (*sparse_free)(void *impl, void *state);
} fe_backend_ops;

/* The points of a calibrated curve of a ceiling against the warps resident per compute
 * unit (GPUs): 2, 4, ..., 64. */
#define FE_CURVE_POINTS 6
#define FE_CURVE_LANES 3 /* the cpu's curve of its SIMD rate against the lanes */

/* Measured ceilings of one backend in one precision (device.calibrate): each from its own
 * micro-benchmark (engine/codegen/kernels/calibrate.knl), never from a kernel the model predicts. */
typedef struct fe_calibration {
  int valid;
  int gpu;          /* measured on a GPU: shared memory and atomics are ceilings of their own */
  int tables_l1;    /* the kernels' tables are global memory read through L1 (fe_device_info) */
  double gbytes;    /* DRAM: stream triad bandwidth, GB/s */
  double gflops;    /* FMA rate (an FMA counts 2), GF/s */
  double scalar_gflops; /* the same chains kept out of SIMD registers (the cpu's kernels: gcc
                         * vectorizes few of their loops); a GPU's items are its lanes: gflops */
  double launch_us; /* a launch queued behind others, microseconds */
  double sync_us;   /* a launch and the host's wait for it, microseconds */
  double l2_gbytes; /* a triad on arrays that fit the last-level cache, GB/s */
  double shared_gbytes; /* shared-memory loads, one word per item, consecutive, GB/s */
  double nonfma_gops;   /* divisions (chains of them), G/s */
  double atomic_gops;   /* atomic adds to scattered addresses, G/s */
  double constant_gops; /* constant-table words served, a warp reading 32 distinct ones, G/s */
  double indexed_gops;  /* the cpu: values gathered or scatter-added through a cell map, one
                         * at a time, as its kernels' first and last loops do, each value's
                         * node its first touch (from beyond L1), G/s (0: GPUs) */
  double indexed_l1_gops; /* the same loops over nodes touched just before (in L1), G/s */
  double llc_keep_bytes; /* the cpu: the last-level cache a call keeps from one run to the
                         * next, measured (the cached triad's rate falls past it), bytes (0:
                         * not measured: half the cache) */
  double llc_gbytes;     /* the cpu: the cached triad over a quarter of the last-level cache
                         * (from there, beyond L2), GB/s (0: not measured) */
  double llc_curve[FE_CURVE_POINTS]; /* the cpu: the same triad over 3/8, 4/8, ..., the whole
                         * last-level cache, GB/s (0: not measured) */
  double indexed_llc_gops; /* the first touches of vectors that a quarter of the last-level
                            * cache holds (a call whose data it keeps), G/s (0: not measured) */
  double padded_gflops; /* the cpu: sumfact's contractions over its padded arrays (8 lanes,
                         * the padding's arithmetic in every operand's address: fe_fma_padded),
                         * GF/s (0: not measured) */
  double rows_gbytes;   /* the cpu: a sparse matrix's rows streamed from memory, values and
                         * column indices, x read through them (csr's loop), GB/s (0: not
                         * measured: the DRAM rate) */
  /* GPUs: the L1's lookups for global loads of data it holds, beside its data pipe (the
   * shared ceiling): warp requests that touch one line, G/s, and lines looked up by requests
   * that touch 32 lines of distinct banks, G/s (0: not measured, the cpu) */
  double l1_request_gops, l1_line_gops;
  /* GPUs: the waits on one group's path, microseconds (0: not measured, the cpu): a load
   * from device memory and one from L2 whose address came from the load before (a pointer
   * chase), and a phase (a shared store, a barrier, the load of another item's word) */
  double dram_latency_us, l2_latency_us, phase_latency_us;
  /* the cpu: a cycle of llvm-mca's model of the core, nanoseconds: a chain of dependent
   * multiply-adds timed over its hot loop's cycles (0: llvm-mca absent, GPUs) */
  double cycle_ns;
  /* the host's copies of a small buffer from and to the device (fe_backend_ops read and write:
   * what a split space's exchange makes, engine/parallel/exchange.c), fitted over 8 bytes to
   * 256 KiB as a latency, microseconds, and a rate, GB/s */
  double read_us, read_gbytes, write_us, write_gbytes;
  /* the cpu: its last-level cache and a core's L1 data cache, bytes (fe_device_info; 0: not
   * known, GPUs): what a call's data and a group's arrays are measured against */
  double llc_bytes, l1_bytes;
  /* the cpu: the reals of this precision one SIMD register of its kernels holds
   * (fe_device_info's vector_bytes over a real's; 0: not known, GPUs) */
  double vector_lanes;
  /* GPUs: the fraction of the ceiling reached with 2^(k+1) warps resident per compute unit
   * (k = 0..5), for DRAM, shared memory and FMA; 0: not measured (the cpu). The cpu
   * (FE_CURVE_LANES): the SIMD multiply-add rate with 2^(k+1) lanes, the cells of a group,
   * as a fraction of gflops; 0: not measured (GPUs) */
  double curve[4][FE_CURVE_POINTS];
} fe_calibration;

/* An open backend, shared by everything that computes on it. */
typedef struct fe_backend {
  const fe_backend_ops *ops; /* the backend's table, alloc, release, read and write counted */
  void *impl;
  char name[16];
  fe_device_info info;
  fe_calibration calib[FE_NPRECISIONS];
  fe_backend_ops counted;    /* the table ops points to */
  size_t mem_now, mem_peak;  /* bytes of buffers allocated through ops and not released */
  /* what ops's read and write moved between the host and the backend's memory since it was
   * opened: bytes and calls (fe_backend_transfers) */
  size_t read_bytes, written_bytes, reads, writes;
  int sharers;               /* ranks of this machine on this device, this one counted (info's
                              * share_key; counted by a split space's first action, every rank
                              * together: engine/operator/operator-action.c), 0 until then */
} fe_backend;

/* registry (backends/backend.c) */
int fe_backend_get(const char *name, fe_backend **be); /* opens on first use, then cached */
int fe_backend_count(void);                            /* backends compiled in */
const char *fe_backend_name(int i);
/* Whether backend i can be used here; if not, why (a sentence). Opens it to find out. */
int fe_backend_available(int i, char *why, size_t nwhy);
void fe_backend_shutdown(void); /* closes every open backend */
/* Backend memory felab holds now and the most it has held since the last reset (reset = 1
 * starts a new peak at what is held now). */
void fe_backend_memory(fe_backend *be, size_t *now, size_t *peak, int reset);
/* Bytes and calls of reads (to the host) and writes (from it) through be's table so far. */
void fe_backend_transfers(fe_backend *be, size_t *read_bytes, size_t *written_bytes, size_t *reads,
                          size_t *writes);
fe_backend *fe_backend_opened(int i); /* backend i if it is open, else NULL (opens nothing) */

/* session defaults (set by the shell's --backend/--precision and device.use) */
const char *fe_backend_default(void);
int fe_backend_set_default(const char *name); /* checks the name, not availability */
const char *fe_backend_best(void);            /* cuda > opencl on a GPU > cpu */
fe_precision fe_precision_default(void);
void fe_precision_set_default(fe_precision p);
int fe_precision_parse(const char *s, fe_precision *p); /* "double", "single" or "float" */
const char *fe_precision_name(fe_precision p);          /* "double" or "single" */
size_t fe_precision_size(fe_precision p);
/* Check the vector arguments of a built-in vector operation op: v[i] (named by the letter
 * names[i]) must be allocated and hold n reals of precision prec. */
int fe_vectors_check(const char *op, const char *names, const fe_buffer *const *v, size_t n,
                     fe_precision prec);
#define FE_VECTORS(...) ((const fe_buffer *const[]){__VA_ARGS__})

/* `felab --cuda-trial`: run the one kernel launch a session sends on stdin in a CUDA
 * context of this process's own and answer on stdout (backends/cuda/cuda-trial.c); the
 * process's exit status. */
int fe_cuda_trial_serve(void);

/* helpers shared by backends */
/* Set an FE_ERR_COMPILE error from a compiler log: names each source line the log points
 * at ("<what>:LINE:") and quotes it. */
int fe_backend_compile_error(const char *backend, const char *source, const char *log);
/* 64-bit FNV-1a hash of a string, for compile caches. */
unsigned long long fe_hash_string(const char *s, unsigned long long seed);
/* What names a device's measurements (its calibration, its autotuned choices): the backend,
 * the device's name and its compute units (the cpu: the OpenMP threads, whose rates are
 * not those of another count: a session with OMP_NUM_THREADS=1 measures its own). */
unsigned long long fe_device_hash(const fe_backend *be);
/* Seconds of a monotonic wall clock (CLOCK_MONOTONIC), for every stage and kernel timing. */
double fe_clock(void);
/* The user's cache directory for felab (created): $XDG_CACHE_HOME/felab or ~/.cache/felab. */
int fe_cache_dir(const char *sub, char *path, size_t n);
/* An exclusive lock on the file path (created) shared by the processes of a machine: its
 * descriptor, held until fe_cache_unlock; -1 where it cannot be had (the caller goes on
 * without it). */
int fe_cache_lock(const char *path);
void fe_cache_unlock(int fd);
/* The lock of a compiled kernel's source hash in the cache folder sub (one of
 * FE_CACHE_LOCKS files, sub/lock.NN, picked by the hash): held while one process compiles it,
 * so that the others sharing the cache (mpirun's ranks) wait and load it; -1 without one. */
enum { FE_CACHE_LOCKS = 64, FE_CACHE_BUSY = -2 };
int fe_cache_lock_kernel(const char *sub, unsigned long long hash);
/* The same lock if no other process holds it now, without waiting: FE_CACHE_BUSY if one
 * does (it is compiling a kernel of that lock), -1 without a lock to have. */
int fe_cache_trylock_kernel(const char *sub, unsigned long long hash);
/* Remove a cache entry that failed to load (truncated, corrupt, another compiler's), saying
 * so on stderr the first time in a process; 1 if there was one to remove. */
int fe_cache_drop(const char *path, const char *reason);

#endif
