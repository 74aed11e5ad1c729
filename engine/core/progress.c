/* felab progress: the state of the open frames and the line drawn from them.
 *
 * One session-wide record behind a mutex: the engine's loops update it from the main
 * thread, and a watcher thread (fe_progress_watch) may redraw it while the main thread
 * blocks in a library. The sink is called with the lock held, so lines never interleave.
 *
 * The estimate of an iterative frame assumes the residual keeps falling at the rate it has
 * fallen so far, log r_k = log r_1 + (k - 1) rate, so the iterations still needed are
 * (log target - log r_k) / rate, each taking the mean time of those done. A residual that
 * does not fall gives no estimate but the bound of the iterations left to max. */
#include "engine/core/progress.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define MAX_FRAMES 4        /* deeper frames are counted, not shown */
#define DEFAULT_AFTER 2.0   /* seconds before the line appears */
#define REDRAW_EVERY 0.15   /* seconds between two drawings */
#define WATCH_TICK_NS 50000000L /* the watcher's sleep between looks */

typedef enum { FRAME_PLAIN, FRAME_ITERATION, FRAME_FRACTION } frame_kind;

/* One open call. */
typedef struct frame {
  char what[24];    /* "cg", "newton", "gmsh" */
  char phase[48];   /* what it does now ("meshing 3D"), or "" */
  frame_kind kind;
  int k, max;       /* iteration k of max (0: no limit) */
  double r, target; /* residual norm and the norm it stops at */
  double done;      /* fraction done */
  double t_begin;   /* when the frame opened */
  int quiet;        /* the call prints its own monitor lines: draw nothing while open */
  int started;      /* an iteration was reported: k_first is set */
  int k_first;      /* the first iteration reported ... */
  double lnr_first, t_first; /* ... its log residual and time */
  double t_last;    /* when the last iteration was reported */
} frame;

static struct {
  pthread_mutex_t lock;
  fe_progress_sink sink;
  void *ctx;
  double after;        /* negative: DEFAULT_AFTER */
  frame frames[MAX_FRAMES];
  int depth;           /* open frames, possibly more than MAX_FRAMES */
  int shown;           /* a line is drawn */
  int drawn;           /* a line was drawn since the last fe_progress_reset */
  double last_draw;
  pthread_t watcher;
  int watching;        /* the watcher thread runs */
  int stop_watching;   /* asks it to end */
  int watches;         /* open fe_progress_watch(1) calls (they nest: a compile in a setup) */
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .after = -1};

/* Seconds on a monotonic clock. */
static double now_seconds(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A duration as people read it: "4.2 s", "37 s", "3m05s", "2h10m". */
static void format_duration(double s, char *buf, size_t size)
{
  if (s < 0) s = 0;
  if (s < 9.95) snprintf(buf, size, "%.1f s", s);
  else if (s < 59.5) snprintf(buf, size, "%.0f s", s);
  else if (s < 3600) snprintf(buf, size, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
  else snprintf(buf, size, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

/* Seconds frame f still needs at time now, or a negative number when it cannot tell;
 * *bound is set when the estimate is only the iteration limit. */
static double frame_remaining(const frame *f, double now, int *bound)
{
  *bound = 0;
  if (f->kind == FRAME_FRACTION) {
    double spent = now - f->t_begin;
    return f->done > 0.01 && spent > 0 ? spent * (1 - f->done) / f->done : -1;
  }
  if (f->kind != FRAME_ITERATION || !f->started || f->k - f->k_first < 2) return -1;
  double per_iteration = (f->t_last - f->t_first) / (f->k - f->k_first);
  double left = -1;
  if (f->r > 0 && f->target > 0 && isfinite(f->r)) {
    double rate = (log(f->r) - f->lnr_first) / (f->k - f->k_first); /* per iteration */
    if (rate < 0) left = fmax(0, (log(f->target) - log(f->r)) / rate);
  }
  if (f->max > 0 && (left < 0 || left > f->max - f->k)) {
    *bound = left < 0;
    left = f->max - f->k;
  }
  if (left < 0) return -1;
  return fmax(0, left * per_iteration - (now - f->t_last));
}

/* Append frame f's part of the line to buf (n bytes used of size). */
static int frame_text(const frame *f, double now, char *buf, int n, int size)
{
  if (n >= size) return n;
  n += snprintf(buf + n, (size_t)(size - n), "%s", f->what);
  if (f->phase[0] && n < size) n += snprintf(buf + n, (size_t)(size - n), " %s", f->phase);
  if (f->kind == FRAME_ITERATION && n < size) {
    if (f->max > 0) n += snprintf(buf + n, (size_t)(size - n), " %d/%d", f->k, f->max);
    else n += snprintf(buf + n, (size_t)(size - n), " %d", f->k);
    if (n < size) n += snprintf(buf + n, (size_t)(size - n), "  |r| %.2e", f->r);
    if (f->target > 0 && n < size)
      n += snprintf(buf + n, (size_t)(size - n), " -> %.1e", f->target);
  } else if (f->kind == FRAME_FRACTION && n < size) {
    n += snprintf(buf + n, (size_t)(size - n), " %.0f%%", 100 * f->done);
  }
  int bound;
  double left = frame_remaining(f, now, &bound);
  if (left >= 0 && n < size) {
    char t[32];
    format_duration(left, t, sizeof t);
    n += snprintf(buf + n, (size_t)(size - n), bound ? "  <= %s left (maxit)" : "  ~%s left", t);
  }
  return n;
}

/* The line for the open frames at time now: the frames joined by " | ", then the time
 * the outermost has run. Lock held. */
static void compose(double now, char *buf, int size)
{
  int n = 0, shown = P.depth < MAX_FRAMES ? P.depth : MAX_FRAMES;
  buf[0] = '\0';
  for (int i = 0; i < shown && n < size; i++) {
    if (i > 0) n += snprintf(buf + n, (size_t)(size - n), " | ");
    n = frame_text(&P.frames[i], now, buf, n, size);
  }
  if (P.depth > 0 && n < size) {
    char t[32];
    format_duration(now - P.frames[0].t_begin, t, sizeof t);
    snprintf(buf + n, (size_t)(size - n), "  [%s]", t);
  }
}

/* Draw the line if the outermost call has run long enough and the last drawing is old
 * enough. Lock held. */
static void maybe_draw(double now)
{
  if (!P.sink || P.depth == 0) return;
  for (int i = 0; i < P.depth && i < MAX_FRAMES; i++)
    if (P.frames[i].quiet) return;
  double after = P.after < 0 ? DEFAULT_AFTER : P.after;
  if (now - P.frames[0].t_begin < after) return;
  if (P.shown && now - P.last_draw < REDRAW_EVERY) return;
  char line[512];
  compose(now, line, sizeof line);
  P.sink(line, P.ctx);
  P.shown = P.drawn = 1;
  P.last_draw = now;
}

/* Erase a drawn line. Lock held. Returns whether there was one. */
static int erase(void)
{
  int was = P.shown;
  if (P.shown && P.sink) P.sink("", P.ctx);
  P.shown = 0;
  return was;
}

/* The innermost open frame, or NULL when there is none or it is too deep to keep. */
static frame *top(void)
{
  return P.depth > 0 && P.depth <= MAX_FRAMES ? &P.frames[P.depth - 1] : NULL;
}

void fe_progress_set_sink(fe_progress_sink sink, void *ctx)
{
  pthread_mutex_lock(&P.lock);
  erase();
  P.sink = sink;
  P.ctx = ctx;
  pthread_mutex_unlock(&P.lock);
}

void fe_progress_set_after(double seconds)
{
  pthread_mutex_lock(&P.lock);
  P.after = seconds;
  pthread_mutex_unlock(&P.lock);
}

void fe_progress_begin(const char *what, int quiet)
{
  pthread_mutex_lock(&P.lock);
  if (P.depth < MAX_FRAMES) {
    frame *f = &P.frames[P.depth];
    memset(f, 0, sizeof *f);
    snprintf(f->what, sizeof f->what, "%s", what ? what : "");
    f->quiet = quiet;
    f->t_begin = now_seconds();
  }
  P.depth++;
  pthread_mutex_unlock(&P.lock);
}

void fe_progress_iteration(int k, int max, double r, double target)
{
  pthread_mutex_lock(&P.lock);
  frame *f = top();
  if (f) {
    double now = now_seconds();
    f->kind = FRAME_ITERATION;
    f->k = k;
    f->max = max;
    f->r = r;
    f->target = target;
    f->t_last = now;
    if (!f->started || k < f->k_first || !isfinite(f->lnr_first)) {
      f->started = 1; /* the first report, or a restart of the count */
      f->k_first = k;
      f->lnr_first = r > 0 ? log(r) : NAN;
      f->t_first = now;
    }
    maybe_draw(now);
  }
  pthread_mutex_unlock(&P.lock);
}

void fe_progress_fraction(double done)
{
  pthread_mutex_lock(&P.lock);
  frame *f = top();
  if (f) {
    f->kind = FRAME_FRACTION;
    f->done = done < 0 ? 0 : done > 1 ? 1 : done;
    maybe_draw(now_seconds());
  }
  pthread_mutex_unlock(&P.lock);
}

void fe_progress_phase(const char *phase)
{
  pthread_mutex_lock(&P.lock);
  frame *f = top();
  if (f) {
    snprintf(f->phase, sizeof f->phase, "%s", phase ? phase : "");
    maybe_draw(now_seconds());
  }
  pthread_mutex_unlock(&P.lock);
}

void fe_progress_end(void)
{
  pthread_mutex_lock(&P.lock);
  if (P.depth > 0) P.depth--;
  if (P.depth == 0) erase();
  pthread_mutex_unlock(&P.lock);
}

static void watch(int on, int force);

int fe_progress_reset(void)
{
  watch(0, 1);
  pthread_mutex_lock(&P.lock);
  P.depth = 0;
  erase();
  int was = P.drawn;
  P.drawn = 0;
  pthread_mutex_unlock(&P.lock);
  return was;
}

void fe_progress_line(char *buf, int size)
{
  if (size <= 0) return;
  pthread_mutex_lock(&P.lock);
  compose(now_seconds(), buf, size);
  pthread_mutex_unlock(&P.lock);
}

/* The watcher: redraw every tick until asked to stop. */
static void *watch_loop(void *arg)
{
  (void)arg;
  struct timespec tick = {0, WATCH_TICK_NS};
  for (;;) {
    pthread_mutex_lock(&P.lock);
    int stop = P.stop_watching;
    if (!stop) maybe_draw(now_seconds());
    pthread_mutex_unlock(&P.lock);
    if (stop) return NULL;
    nanosleep(&tick, NULL);
  }
}

/* Start or stop the watcher; calls nest, the outermost stop ends it (force: end it now). */
static void watch(int on, int force)
{
  pthread_mutex_lock(&P.lock);
  if (force) P.watches = 0;
  else if (on) P.watches++;
  else if (P.watches > 0) P.watches--;
  int running = P.watching, wanted = P.watches > 0 && P.sink != NULL;
  if (wanted && !running) {
    P.stop_watching = 0;
    P.watching = pthread_create(&P.watcher, NULL, watch_loop, NULL) == 0;
  } else if (!wanted && running) {
    P.stop_watching = 1;
  }
  pthread_mutex_unlock(&P.lock);
  if (!wanted && running) {
    pthread_join(P.watcher, NULL);
    pthread_mutex_lock(&P.lock);
    P.watching = 0;
    pthread_mutex_unlock(&P.lock);
  }
}

void fe_progress_watch(int on) { watch(on, 0); }
