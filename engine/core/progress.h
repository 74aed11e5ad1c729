/* felab progress: one live line for long engine calls.
 *
 * A long loop says what it does and how far it is; the engine never writes to the terminal
 * itself. The shell installs a sink (a function that draws the line) when the session is
 * at a terminal, and nothing is drawn until the outermost call has run `after` seconds
 * (2 by default), then at most every 0.15 s. Calls nest (Newton runs a Krylov solve per
 * step): each fe_progress_begin opens a frame, the line shows every open frame, and the
 * end of the outermost one clears it.
 *
 *   fe_progress_begin("cg", o->monitor);
 *   for (it = 1; ...) { ...; fe_progress_iteration(it, maxit, rn, rtol * r0); }
 *   fe_progress_end();
 *
 * A frame reports iterations toward a residual target (the remaining time is estimated
 * from the residual's rate of decrease), a fraction done, or only a phase and the elapsed
 * time (a library call that blocks: fe_progress_watch redraws from a thread meanwhile).
 * Safe to call with no sink installed: it only keeps the frames. */
#ifndef FE_PROGRESS_H
#define FE_PROGRESS_H

/* Draws line (no newline, no '\r'); an empty line means "erase what was drawn". */
typedef void (*fe_progress_sink)(const char *line, void *ctx);

/* Install the sink (NULL: nothing is ever drawn) and its context. */
void fe_progress_set_sink(fe_progress_sink sink, void *ctx);
/* Seconds a call runs before its line appears (negative: the default, 2 s). */
void fe_progress_set_after(double seconds);

/* Open a frame named what ("cg", "newton", "gmsh"); the name is copied. quiet: the call
 * prints its own lines (a solver's monitor), so nothing is drawn while the frame is open. */
void fe_progress_begin(const char *what, int quiet);
/* Iteration k of at most max (0: no limit) with residual norm r, stopping at target. */
void fe_progress_iteration(int k, int max, double r, double target);
/* The fraction done, in [0, 1]. */
void fe_progress_fraction(double done);
/* What the frame does now ("meshing 3D"); copied. */
void fe_progress_phase(const char *phase);
/* Close the innermost frame; closing the outermost erases the line. */
void fe_progress_end(void);
/* Close every frame and erase the line (after an error or Ctrl-C unwound the engine).
 * Returns 1 when a line was drawn (and erased) since the last reset. */
int fe_progress_reset(void);

/* Start (on = 1) or stop (on = 0) a thread that redraws the line while the caller blocks in
 * a call that reports nothing (Gmsh meshing): the elapsed time keeps moving. Calls nest (a
 * kernel's compile inside an operator's setup): the outermost stop ends the thread. */
void fe_progress_watch(int on);

/* The line as it would be drawn now, into buf (for tests); "" when no frame is open. */
void fe_progress_line(char *buf, int size);

#endif
