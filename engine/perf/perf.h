/* felab reports and the performance model: what a call counted, measured and predicted. */
#ifndef FE_PERF_H
#define FE_PERF_H

#include "backends/backend.h"

/* The ceilings of the model: each is calibrated by its own micro-benchmark, and a call's
 * work is counted against each. */
typedef enum {
  FE_CEIL_DRAM,    /* bytes to and from device memory */
  FE_CEIL_L2,      /* global loads beyond the minimal bytes (gathers of shared nodes) */
  FE_CEIL_SHARED,  /* shared-memory traffic, in wavefront bytes (128 per wavefront) */
  FE_CEIL_FMA,     /* floating-point operations at the FMA rate */
  FE_CEIL_NONFMA,  /* divisions and square roots */
  FE_CEIL_ATOMIC,  /* atomic adds to global memory */
  FE_CEIL_CONSTANT, /* loads of the constant tables: one per distinct word a warp reads */
  FE_CEIL_INDEXED, /* the cpu: values gathered and scatter-added through the cell map, one at
                    * a time (its kernels' first and last loops) */
  FE_CEIL_LAUNCH,  /* launches and the host's wait */
  FE_CEIL_LATENCY, /* GPUs: the waits on each group's path (dependent loads, barriers), once a
                    * wave of the groups resident at once */
  FE_NCEILINGS
} fe_ceiling;

/* "dram", "l2", "shared", "fma", "nonfma", "atomics", "constant", "indexed", "launches",
 * "latency" */
const char *fe_ceiling_name(int c);

#define FE_L1_LINES 32 /* the most lines one warp's load touches */

/* What one barrier-separated phase of a kernel does, in the units of fe_work's totals (the
 * whole mesh's): the model takes each phase's share of every ceiling. */
typedef struct fe_phase_work {
  double bytes, l2_bytes, shared_bytes, l1_wavefronts, table_wavefronts;
  double lines, table_lines; /* the global loads' lines looked up (l1_lines, table_lines: k n_k) */
  double flops, nonfma, constant;
  double barriers; /* the barrier-separated phases of like content it stands for (0: one) */
} fe_phase_work;

#define FE_PHASES_MAX 4 /* phases a strategy describes (phases of like content as one) */

/* What one action does, per ceiling: a strategy counts it from its own loops. */
typedef struct fe_work {
  double flops;        /* floating-point operations (an FMA counts 2) */
  double bytes;        /* the minimal bytes the algorithm must move (DRAM) */
  double l2_bytes;     /* global loads a kernel makes beyond those (re-reads of shared data) */
  double shared_bytes; /* shared-memory wavefront bytes: a warp's access of 4-byte words
                        * costs 128 bytes per wavefront (a word read by every item: one) */
  double nonfma;       /* divisions and square roots (each also counted in flops) */
  double vec_flops;    /* of flops, those of loops the cpu's compiler makes SIMD (the phases
                        * over a group's cells, the cells the lanes): the vectorized FMA rate */
  double atomics;      /* atomic adds to global memory */
  double constant;     /* constant-table loads, counted per distinct word a warp reads (the
                        * constant cache serves one word at a time: divergent reads wait) */
  double indexed;      /* values a kernel gathers or adds through the cell map, one at a time
                        * (on the cpu these loops issue an index, a load and a store each) */
  double indexed_first; /* of those, each node's first touch a call (the cpu's walk goes from
                        * a cell to the next, so the others find their node in L1) */
  /* the cpu: a group's shared geometric factors put in its cells' lanes (FE_GROUP_FACTORS):
   * lanes a SIMD compare and blend (or a copy) fills, one instruction a vector of them, at the
   * vectorized FMA rate as a multiply-add a lane; and values an emulated gather fills, one
   * at a time (an index taken out, a load, an insert), at the scalar rate as a multiply-add */
  double factor_lanes, factor_gathers;
  /* the cpu: 1 where the bytes are a sparse matrix's rows that a row loop streams, reading x
   * through their column indices (csr), at the calibrated rate of such rows (rows_gbytes) */
  double rows;
  /* the cpu: of bytes, those a thread reads in a phase of their own between its loops (a
   * folded apply's per-point words, read in the quadrature phase): they add to the loops'
   * time at the DRAM rate instead of streaming beside them (as measured on a folded Q3 apply:
   * docs/model.md); and phase_l2_bytes, those a thread asked for ahead into L2 (a group
   * before) and reads in such a phase: they add at the L2 rate (sumfact's folded words on
   * the cpu, docs/model.md) */
  double phase_bytes, phase_l2_bytes;
  /* the cpu: the bytes of a group's arrays that one of its loops sweeps, in and out (its
   * cells in the lanes; 0: not said), and the bytes those loops read, a word a multiply-add:
   * from L1 where the arrays fit it, else from L2 at the calibrated L2 rate, beside the
   * multiply-adds */
  double array_bytes, operand_bytes;
  /* GPUs: global loads' wavefronts through L1, the data pipe shared memory uses too (one per
   * distinct 128-byte line a warp's load touches): the stored factors and the gathers
   * (l1_wavefronts), and the same tables `constant` counts where a backend keeps them in
   * global memory (table_wavefronts: CUDA; OpenCL's __constant tables are `constant`) */
  double l1_wavefronts, table_wavefronts;
  /* GPUs: the same global loads as the L1 looks them up, beside its data pipe: l1_lines[k]
   * (table_lines[k]) warp requests that touch k distinct 128-byte lines (k = 1..32) */
  double l1_lines[FE_L1_LINES + 1], table_lines[FE_L1_LINES + 1];
  long long groups;    /* work groups of the main kernel (0: not known) */
  int group_items;     /* items (threads) per group */
  int lanes;           /* the cpu: a group's cells, the lanes of its SIMD loops (0: not known) */
  /* the cpu: of vec_flops, those of loops that keep several outputs in flight (sumfact's
   * contractions, the table's row outermost): the vectorized rate whole, not the lanes
   * curve, whose calibrated loop is a chain an output (as the point work's are) */
  double inflight_flops;
  /* the cpu: of inflight_flops, those whose operands' addresses go through a padded layout's
   * arithmetic (sumfact's group arrays in double): at the calibrated rate of such a loop
   * (padded_gflops), where lower */
  double padded_flops;
  /* one group's path, in the order its code runs: loads whose address or start waits on
   * the load or barrier before (from device memory: a stream's first touch; from L2:
   * gathers of nodes other cells read too), and barrier-separated phases */
  double dram_trips, l2_trips, phases;
  /* GPUs: the work of each of a group's phases (nphase_work of them; 0: not described, each
   * ceiling then taken as a phase of its own): a phase's pipes run side by side in its warps */
  int nphase_work;
  fe_phase_work phase_work[FE_PHASES_MAX];
  /* the cpu: the iterations of the kernel's hot loop in the call (the innermost loop with the
   * most floating-point work: patch's points; 0: not said), whose cycles llvm-mca simulates */
  double loop_trips;
} fe_work;

/* A call's setup, part by part: each part's name (an identifier: "schedule", "cell_data",
 * "geometry", "pattern", "matrices", "fill", "format", "compile", "transfer", "strategy": the
 * strategy's own rest), its seconds, and the bytes what it built holds after the call (0:
 * nothing kept). A name added twice adds up. */
#define FE_SETUP_PARTS 12
typedef struct fe_setup_parts {
  int n;
  struct {
    char name[24];
    double seconds, bytes;
  } part[FE_SETUP_PARTS];
} fe_setup_parts;

/* Add seconds and bytes to part name of p (a new part past the last; past FE_SETUP_PARTS
 * parts, to the last). */
void fe_setup_part_add(fe_setup_parts *p, const char *name, double seconds, double bytes);
/* The seconds of p's parts, all together. */
double fe_setup_parts_seconds(const fe_setup_parts *p);
/* Add every part of q to p. */
void fe_setup_parts_merge(fe_setup_parts *p, const fe_setup_parts *q);

typedef struct fe_report {
  char action[32];      /* "residual", "apply", "diagonal", "cg", "calibrate", ... */
  char backend[16];
  char device[128];
  char precision[8];
  char strategy[16];
  char why[160];        /* why that strategy ran: asked, or the model's pick and its figures */
  char space[24];       /* "P2 on tet", "Q4^3 on hex": what was integrated ("" if none) */
  char quadrature[64];  /* the rule: "symmetric, 24 points, degree 6" ("" if none) */
  long long ncells, ndofs;
  double flops;             /* counted floating-point operations */
  double bytes;             /* minimal bytes the algorithm must move */
  double seconds;           /* measured kernel time */
  double compile_seconds;   /* JIT time (0 when cached) */
  double transfer_seconds;  /* host<->device copies this call made */
  double setup_seconds;     /* building device data (geometry, maps) */
  fe_setup_parts parts;     /* of it, part by part (an operator's first call on a realization,
                             * an assembly: fe_setup_parts) */
  int kernel_from;          /* an operator action's kernel: 0 not one, 1 compiled by this call,
                             * 2 loaded from a cache by this call, 3 ready from an earlier one */
  int first_run;            /* seconds is the kernel's first run (one-time work included: the
                             * answer comes sooner, the figure is not a steady one); else a
                             * first run, where there was one, is in compile_seconds */
  double predicted_seconds; /* roofline model */
  double peak_gbytes, peak_gflops; /* the ceilings the prediction used */
  char bound[16];           /* the ceiling that binds: "dram", "shared", "fma", ... */
  /* the model's inputs besides flops and bytes (fe_work), and its answer per ceiling */
  double l2_bytes, shared_bytes, nonfma, atomics, constant, vec_flops, indexed, indexed_first;
  double factor_lanes, factor_gathers, rows, phase_bytes, phase_l2_bytes, array_bytes;
  double operand_bytes;
  int pq_added;             /* an apply: it added (w, J w) into CG's parts (fe_action_opts.pq) */
  /* a space split over mpirun's ranks: the shared nodes' exchange with the neighbours after
   * the integration (engine/parallel/dist.c): bytes sent, messages sent, seconds (its host
   * copies, the messages and the sums); 0 on one rank */
  double exchange_bytes, exchange_messages, exchange_seconds;
  int exchange_beside;   /* the exchange ran beside the interior cells' work (two phases) */
  int exchange_direct;   /* the shares went device to device (ranks of one machine), not via the host */
  int exchange_follows;  /* and their gather followed the boundary cells' kernel (backend.h's
                          * follow: its groups placed before the interior's, no wait for one) */
  double exchange_cold;  /* the cpu: the share of the exchange's data (its lists, buffers and
                          * MPI's queues) this action took out of the last-level cache, 1 -
                          * exp(-bytes / keep) (fe_perf_exchange_cold); 0 on a GPU */
  int exchange_host;     /* the cpu's prediction is the link's whole host exchange, between its
                          * warm and cold points by exchange_cold (else the terms alone, each
                          * at a warm rate: 0.26-0.47 of the measured after actions past the
                          * cache, docs/benchmarks.md section 8) */
  int device_sharers;    /* ranks of this machine on this rank's device, itself counted (a split
                          * space's action; 0 on one rank) */
  int device_turns;      /* and they take turns on it, which the prediction leaves out: a GPU's
                          * ranks (their kernels time-sliced), a CPU's ranks times threads past
                          * the machine's cores */
  int device_threads, device_cores; /* a CPU device's: threads a rank, the machine's cores */
  /* and the model's time of it (fe_perf_exchange; in predicted_seconds): all of it, the
   * messages (over the link; beside the interior on a GPU, with the wait for the neighbours'
   * gathers), the device's part alone (its gather, read, write and sums);
   * a CG's: every apply's, and its reductions' (each a gather of the entries other ranks own,
   * its read, and an MPI_Allreduce) in reduce_predicted; 0 on one rank */
  double exchange_predicted, exchange_link, exchange_device, reduce_predicted;
  /* the exchange beside the interior, part by part, measured and predicted (FE_XPART_*): the
   * gather queued and its mark waited for (the model: the wait for a place beside the
   * interior's groups included), the messages, the neighbours' shares' copies queued (through
   * the host: read and written), the sums queued */
  double exchange_parts[4], exchange_terms[4];
  double exchange_wave;     /* when the gather's groups find places beside the interior's first
                             * wave, over an even wave's time (1: its groups alike; 0: not beside,
                             * or the gather follows the boundary cells: no wait) */
  double operand_seconds;   /* the cpu: those operands from L2 (0: from L1), the FMA ceiling
                             * where longer than the multiply-adds */
  double llc_share;         /* the cpu: the share of the bytes beyond its last-level cache (the
                             * rest found there again, read at the L2 triad's rate) */
  double l1_wavefronts, table_wavefronts;
  double l1_lines[FE_L1_LINES + 1], table_lines[FE_L1_LINES + 1]; /* (fe_work) */
  double l1_requests, l1_line_total; /* their sums: requests, lines */
  double l1_tag_seconds;    /* the L1's lookups alone, at the calibrated rates and the last
                             * wave's fill (GPUs; the shared ceiling where longer) */
  long long groups;
  int group_items, lanes;
  double inflight_flops, padded_flops; /* (fe_work) */
  double dram_trips, l2_trips, phases; /* one group's path (fe_work) */
  int nphase_work;          /* and its phases' work (fe_work) */
  fe_phase_work phase_work[FE_PHASES_MAX];
  double serial_seconds;    /* GPUs: one group's phases one after another, each phase's pipes
                             * overlapping by its warps (all the pipes' times added where its
                             * phases are not described), for the whole call */
  double phase_seconds[FE_PHASES_MAX]; /* of it, each described phase's */
  double stagger_seconds;   /* the longest barrier phase's time on the shared ceiling (the L1
                             * data pipe or its lookups), for the whole call */
  double waits_hidden;      /* the share of the waits that stagger hides (GPUs) */
  double loop_trips;        /* the cpu: the hot loop's iterations (fe_work), */
  double loop_cycles;       /* its cycles an iteration in llvm-mca's core (0: not simulated) */
  double loop_seconds;      /* and all of them at the calibrated cycle, over the threads (0:
                             * not known); the FMA ceiling where longer */
  int loop_binds;           /* it is: longer than the multiply-adds and divisions at the rates */
  int regs;                 /* the compiled kernel's registers per item (0: not known) */
  long long shared_per_group; /* and its shared bytes per group */
  double occupancy;         /* resident items over the compute unit's most (0: not known) */
  int resident;             /* groups resident on a compute unit at once (0: not known) */
  char occupancy_limit[16]; /* what bounds it: "threads", "registers", "shared", "groups" */
  double efficiency;        /* the calibrated curve at that occupancy times the last wave's fill */
  double ceiling_seconds[FE_NCEILINGS]; /* the time each ceiling alone would take */
  int launches;
  int iterations;           /* solvers */
  /* a solve's report (cg, bicg, ...): the operator's calls it made (0: the report is one
   * call's), their work on average in flops, bytes and launches less the steps' vector work
   * (extra_*: its own kernels), every other count one call's. The model takes each part alone
   * and adds their times (fe_perf_model) */
  double calls, extra_flops, extra_bytes;
  int extra_launches;
} fe_report;

/* The link between mpirun's ranks (engine/parallel/link.c): a message's time, measured by
 * exchanges between ranks 0 and 1 (a message each way at once, as a split space's exchange
 * sends them) at sizes of 8 bytes to 256 KiB, summed up as a latency and a rate, and an
 * MPI_Allreduce of two doubles over the `ranks` ranks it was measured with. */
#define FE_LINK_POINTS 10
#define FE_LINK_HOST 4
typedef struct fe_link {
  int valid;
  int ranks;           /* the ranks it was measured with */
  double latency_us;   /* a message of 8 bytes, microseconds */
  double gbytes;       /* the rate of large messages (between the two largest measured), GB/s
                        * (0: the latency alone) */
  double allreduce_us; /* an MPI_Allreduce of two doubles over `ranks` ranks, microseconds */
  /* the measured messages, sizes ascending (0 points: the line latency + bytes / rate alone):
   * an MPI's protocols change with the size (OpenMPI's shared memory copies messages over
   * 4 KiB once more), so a message's time is read off them, between two points linearly */
  int npoints;
  double point_bytes[FE_LINK_POINTS], point_us[FE_LINK_POINTS];
  /* a cpu's whole exchange through the host (ranks 0 and 1, one neighbour each), as felab's
   * cpu backend makes it: the shares gathered through their index (contiguous entries of a
   * vector four times as long), copied out, a message each way, copied in, each shared entry
   * the sum of its two sources through the sources' lists; at host_entries entries, measured
   * back to back (warm) and after every rank streamed twice the last-level cache (cold: an
   * action that passed it, on every rank of the machine at once), microseconds (nhost 0: not
   * measured, the terms alone) */
  int nhost;
  double host_entries[FE_LINK_HOST], host_warm_us[FE_LINK_HOST], host_cold_us[FE_LINK_HOST];
  /* and each line more than contiguous entries take (every entry its own line, every other
   * line, gathered and summed: a mesh's interface numbered apart), warm and cold, ns a line;
   * and each 4 KiB page more (a line of entries a page: the prefetchers stop at a page's end,
   * and its translation is looked up), ns a page (0: not measured) */
  double line_warm_ns, line_cold_ns, page_warm_ns, page_cold_ns;
  /* what the cache keeps of the host exchange's data while each rank streams through other
   * bytes: the exchange after S bytes a rank, S from 256 KiB to twice the last-level cache,
   * fitted to warm + (cold - warm) (1 - exp(-S / keep_bytes)), bytes (0: not measured); the
   * model's where the calibration's llc_keep_bytes is 0 (its sizes, a quarter of the cache
   * and up, all past what a virtual machine that reports many times its share keeps) */
  double keep_bytes;
} fe_link;
/* Seconds of one message of `bytes` over l: its measured points, linear between two, the
 * rate beyond the last; the line latency + bytes / rate where it has none. */
double fe_link_message_seconds(const fe_link *l, double bytes);

/* What one exchange of a split space's action does on one rank (fe_dist_exchange_work). */
typedef struct fe_exchange_work {
  double messages; /* sent, one a neighbour (as many received) */
  double bytes;    /* sent, as doubles (as many received) */
  double entries;  /* the packed entries: gathered on the device, read, and as many written */
  double word;     /* bytes of an entry on the device (the precision's) */
  double shared;   /* the distinct shared entries, each made the sum of its sources */
  double sources;  /* the sums' sources, all of them (received slots and this rank's values) */
  int direct;      /* device to device (ranks of one machine, exchange.c's interprocess path):
                    * no read or write by the host, a one-value message a neighbour */
  double cold;     /* the cpu: the share of the exchange's data the action before it took out
                    * of the last-level cache (0 warm .. 1 cold; fe_perf_exchange_cold) */
  double lines;    /* the vector's 64-byte lines the gather and the sums go through (0:
                    * unknown, as many as contiguous entries fill: entries word / 32) */
  double pages;    /* and its 4 KiB pages (0: unknown, entries word / 2048) */
} fe_exchange_work;

/* The model's exchange, each term alone in seconds: the gather (a launch the read waits for,
 * and its entries), the read, the messages, the write, the sums (a launch queued, and their
 * entries), all together. */
typedef struct fe_exchange_terms {
  double gather, read, link, write, sum, total;
} fe_exchange_terms;
enum { FE_XPART_GATHER, FE_XPART_MESSAGES, FE_XPART_COPIES, FE_XPART_SUMS };

/* The exchange x on device calibration c over link l (nothing of the link where l is NULL or
 * not valid): its messages, each of bytes / messages at the link's time of that size
 * (fe_link_message_seconds; without points latency + bytes / rate), plus the device's gather, read, write and
 * sums at c's launches and copies, their entries at the cpu's indexed loops' rate (a GPU: its
 * cached memory rate). Direct (x->direct): the gather and the host's wait for it, a one-value
 * message a neighbour, the neighbours' blocks copied device to device (a launch each, at the
 * device's memory rate: the link between two GPUs is not measured) in write's place, the sums. */
void fe_perf_exchange(const fe_calibration *c, const fe_link *l, const fe_exchange_work *x,
                      fe_exchange_terms *t);
/* The share of an exchange's data an action took out of the last-level cache (fe_exchange_work's
 * cold): `touched` bytes streamed through it (every rank's on the machine) against the bytes it
 * keeps (llc_keep_bytes). */
double fe_perf_exchange_cold(double touched, double keep);
/* The bytes the cache keeps of a cpu's host exchange: calibration c's llc_keep_bytes where
 * it measured one, else link l's keep_bytes, else half the last-level cache. */
double fe_perf_exchange_keep(const fe_calibration *c, const fe_link *l);
/* A reduction of a split space's vectors on N ranks: the sums over the `entries` entries of
 * `word` bytes another rank owns, made on the device (a launch waited for, the entries read
 * through their index), the groups' sums read (up to 64 groups, two sums each), and an
 * MPI_Allreduce (l's, scaled from its ranks to `ranks` by the tree's depth, ceil(log2 ranks)). */
double fe_perf_reduction(const fe_calibration *c, const fe_link *l, double entries, double word,
                         int ranks);
/* The same made on the devices of one machine (CG's node sums, backend.h's fe_node_sum): the
 * correction's sums (a launch queued, the entries read through their index; none without
 * entries) and the node's sum (a launch queued). The mailboxes' writes across the link between
 * the devices and the wait for the other ranks are left out (not measured). */
double fe_perf_reduction_node(const fe_calibration *c, double entries, double word);
/* Fit t = us 1e-6 + bytes / (gbytes 1e9) to n timings, each weighted by its own size (the
 * relative misfits' squares least): the latency and the rate (gbytes 0: none fitted). */
void fe_perf_fit_link(const double *bytes, const double *seconds, int n, double *us,
                      double *gbytes);
/* Scale the work counts of rep (flops, bytes, every ceiling's, its groups and the hot loop's
 * trips; not its launches) by f: one rank's share of a call (perf.compare's ranks). */
void fe_report_scale(fe_report *rep, double f);
/* A solve's tally of the operator's calls it made (their count and work), for its report. */
typedef struct fe_call_tally {
  double calls, flops, bytes;
  int launches;
} fe_call_tally;
/* Add a report's calls to t: one call, or a solve's (rep->calls of them, its vector work left
 * out). */
void fe_call_tally_add(fe_call_tally *t, const fe_report *rep);
/* A solve's report r, its totals (flops, bytes, launches) set: its calls from t, the rest of
 * the totals its vector work (rep.calls, extra_*: fe_perf_model takes each part alone). */
void fe_report_calls(fe_report *r, const fe_call_tally *t);

/* Zero rep, then its head: the action, the backend's name and device, the precision, the
 * strategy and why it ran. */
void fe_report_begin(fe_report *rep, const char *action, const fe_backend *be, fe_precision prec,
                     const char *strategy, const char *why);
/* Shared-memory wavefronts of one warp's access to the words idx[0..n) (n <= 32) of `size`
 * bytes each (idx < 0: the item is idle): 32 banks of 4 bytes serve one word each per
 * wavefront, items reading the same word share it (the bank model of docs/kernels.md). */
int fe_bank_wavefronts(const long long *idx, int n, int size);
/* The same for one warp's shared-memory store: 8-byte words are stored by half-warps, each
 * half its own count (as Nsight Compute's per-instruction wavefronts show for transpose's
 * gather stores; loads keep the whole-warp count: docs/model.md). */
int fe_bank_store_wavefronts(const long long *idx, int n, int size);
/* The distinct words among idx[0..n) (idx < 0: idle): what one warp's read of a constant
 * table costs the constant cache. */
int fe_distinct_words(const long long *idx, int n);
/* The L1 wavefronts of one warp's global load of the words idx[0..n) of `size` bytes
 * (idx < 0: idle), data the L1 holds: the bank model, 8-byte words by half-warps. */
int fe_l1_wavefronts(const long long *idx, int n, int size);
/* The distinct 128-byte lines among the words idx[0..n) of `size` bytes (idx < 0: idle):
 * what the L1 looks up for one warp's global load. */
int fe_l1_lines(const long long *idx, int n, int size);
/* The expected wavefronts of a warp's access to 32 distinct words of `size` bytes at
 * random places (a gather through a node list), by a fixed-seed sample. */
double fe_bank_random_wavefronts(int size);

/* What the session built, counted (not timed): kernels compiled, kernels loaded from a
 * cache (the disk's or the session's), device data set up (an operator's realization for a
 * backend, precision and strategy). */
typedef struct fe_build_counts {
  long long compiled, cached, setups;
} fe_build_counts;
fe_build_counts fe_perf_build_counts(void);
void fe_perf_count_setup(void);
/* A loaded module taken again (the sparse modules' sharing): counted as cached. */
void fe_perf_count_cached(void);
/* Compile source on be (the backend's compile), counting what it did: every engine compile
 * goes through here. */
int fe_compile(fe_backend *be, const char *source, fe_module **mod, double *seconds, int *cached);
/* Where the backend can (cuda), compile the n sources side by side into its caches ahead of
 * fe_compile (counted as compiled; fe_compile then loads them); returns the wall seconds. */
double fe_precompile(fe_backend *be, const char *const *sources, int n);

/* Copy the counted work w into the report. */
void fe_report_work(fe_report *rep, const fe_work *w);
/* The occupancy of kernel k launched in groups of rep->group_items into rep (from the
 * compiled kernel's registers and shared memory and the device's limits); on the cpu, its
 * hot loop's cycles where the work counts the loop's iterations; nothing when the backend
 * does not say. */
void fe_perf_occupancy(fe_backend *be, fe_kernel *k, fe_report *rep);
/* The model's prediction of one call into rep: the time of each ceiling alone (the work
 * counted against it over its calibrated rate, at the kernel's occupancy), the largest of
 * them stretched by the last wave's fill, plus the launches; calibrates the backend first
 * if it has no calibration yet. */
int fe_perf_predict(fe_backend *be, fe_precision prec, fe_report *rep);
/* The same with given ceilings (what-if: another device's); rep's occupancy and groups
 * are used as they are. */
void fe_perf_model(const fe_calibration *c, int compute_units, fe_report *rep);
/* Measure the ceilings of a backend in one precision (stream triad + FMA kernels). */
int fe_perf_calibrate(fe_backend *be, fe_precision prec, fe_report *rep);
/* Load stored calibrations for this device from the cache dir (0 if none). */
int fe_perf_load_calibration(fe_backend *be);

double fe_report_gflops(const fe_report *r);
double fe_report_gbytes(const fe_report *r);
/* A readable block of a few lines. */
void fe_report_format(const fe_report *r, char *buf, size_t n);

/* session log (perf.log) */
void fe_perf_log_add(const fe_report *r);
int fe_perf_log_count(void);
const fe_report *fe_perf_log_get(int i);
void fe_perf_log_clear(void);

#endif
