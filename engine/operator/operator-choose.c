/* The strategy table and the choice of a strategy for an action: the one asked for, one that
 * takes every option given, the default the measurements or the model make here, or the one
 * autotuning's trials measure fastest; and the table A:strategies() shows. Part of
 * engine/operator/operator.c's operator (operator-private.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/operator/autotune.h"
#include "engine/operator/operator.h"
#include "engine/operator/operator-private.h"
#include "engine/operator/strategy.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/dist.h"

static const fe_strategy *const strategy_list[] = {&fe_strategy_transpose, &fe_strategy_patch,
                                                   &fe_strategy_sumfact, &fe_strategy_csr,
                                                   &fe_strategy_ebe};
#define NSTRATEGIES ((int)(sizeof strategy_list / sizeof strategy_list[0]))

int fe_strategy_count(void) { return NSTRATEGIES; }
const fe_strategy *fe_strategy_at(int i) { return i >= 0 && i < NSTRATEGIES ? strategy_list[i] : NULL; }

const fe_strategy *fe_strategy_find(const char *name)
{
  for (int i = 0; i < NSTRATEGIES; i++)
    if (!strcmp(strategy_list[i]->name, name)) return strategy_list[i];
  return NULL;
}

/* ---- choosing a strategy ---- */

/* Whether strategy st can run here; if not, why. */
static int strategy_applies(const fe_strategy *st, const fe_operator *A, const fe_backend *be,
                            fe_precision prec, char *why, size_t n)
{
  why[0] = '\0';
  return st->applies(A, be, prec, why, n) == 0;
}

double fe_predict_seconds(fe_backend *be, fe_precision prec, const fe_work *w)
{
  fe_report rep;
  memset(&rep, 0, sizeof rep);
  fe_report_work(&rep, w);
  rep.launches = 1;
  if (fe_perf_predict(be, prec, &rep)) {
    fe_error_clear();
    return w->bytes;
  }
  return rep.predicted_seconds;
}

/* The model's time for action a with strategy st, before anything is built. */
static double strategy_predict(const fe_strategy *st, fe_operator *A, fe_backend *be,
                               fe_precision prec, fe_action a)
{
  fe_work w = {0};
  st->estimate(A, be, prec, a, &w);
  return fe_predict_seconds(be, prec, &w);
}

static int choose_default(fe_operator *A, fe_backend *be, fe_precision prec, int autotune,
                          const fe_strategy **out, char *why, size_t nwhy);

/* "walk, lanes": the names of the options o gives, and "walk: patch; recompute: ebe": which
 * strategies take each. */
static void given_names(const fe_action_opts *o, int takers, char *buf, size_t n)
{
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < o->given->n && len < n; i++) {
    char who[128];
    fe_action_option_takers(o->given->item[i].name, who, sizeof who);
    len += (size_t)snprintf(buf + len, n - len, "%s%s%s%s", i ? (takers ? "; " : ", ") : "",
                            o->given->item[i].name, takers ? ": " : "", takers ? who : "");
  }
}

/* The strategy of a call that names none but gives options that some strategies take (the
 * bits of `takers`): the default when it takes them all, else the one the model predicts
 * fastest among those that take them all and apply here; an error naming the options when
 * none does. */
static int pick_among(fe_operator *A, const fe_action_opts *o, fe_backend *be, fe_precision prec,
                      unsigned takers, const fe_strategy **out, char *why, size_t nwhy)
{
  char names[256], reason[256] = "";
  const char *caller = o->caller ? o->caller : "", *colon = o->caller ? ": " : "";
  given_names(o, !takers, names, sizeof names);
  FE_ASSERT(takers, FE_ERR_ARG, "%s%sno one strategy takes every option given (%s): name one "
            "with strategy = ...", caller, colon, names);
  fe_action_opts plain = *o;
  plain.given = NULL;
  FE_CHECK(fe_operator_pick_strategy(A, &plain, be, prec, out, why, nwhy));
  for (int i = 0; i < NSTRATEGIES; i++)
    if (strategy_list[i] == *out && (takers >> i & 1)) return 0; /* the default takes them */
  const fe_strategy *best = NULL, *refused = NULL;
  double tbest = 0;
  for (int i = 0; i < NSTRATEGIES; i++) {
    const fe_strategy *st = strategy_list[i];
    if (!(takers >> i & 1)) continue;
    if (!strategy_applies(st, A, be, prec, reason, sizeof reason)) {
      refused = refused ? refused : st;
      continue;
    }
    double t = strategy_predict(st, A, be, prec, FE_ACTION_APPLY);
    if (!best || t < tbest) best = st, tbest = t;
  }
  if (!best) {
    strategy_applies(refused, A, be, prec, reason, sizeof reason);
    FE_ERROR(FE_ERR_ARG, "%s%sno strategy that takes %s applies to %s on %s (%s: %s)", caller,
             colon, names, A->V->name, be->name, refused->name, reason);
  }
  *out = best;
  snprintf(why, nwhy, "default among the strategies that take %s: predicted fastest (apply: %s "
           "%.3g ms)", names, best->name, tbest * 1e3);
  return 0;
}

/* The strategy an action runs with: the one asked for (an error with the reason when it does
 * not apply), else one that measurements made the default here, else the one the model
 * predicts fastest for the Jacobian action (what solvers repeat); a call that gives options
 * only some strategies take chooses among those (pick_among). why says which and why. */
int fe_operator_pick_strategy(fe_operator *A, const fe_action_opts *o, fe_backend *be,
                              fe_precision prec, const fe_strategy **out, char *why, size_t nwhy)
{
  char reason[256];
  const char *s = o ? o->strategy : NULL;
  if (s) {
    const fe_strategy *st = fe_strategy_find(s);
    if (!st) {
      char names[128] = "";
      for (int i = 0; i < NSTRATEGIES; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 strategy_list[i]->name);
      FE_ERROR(FE_ERR_ARG, "unknown strategy '%s' (felab has: %s; A:strategies() says which "
               "apply)", s, names);
    }
    FE_ASSERT(strategy_applies(st, A, be, prec, reason, sizeof reason), FE_ERR_ARG,
              "strategy '%s' does not apply to %s on %s: %s", s, A->V->name, be->name, reason);
    *out = st;
    snprintf(why, nwhy, "asked for");
    return 0;
  }
  if (o && fe_strategies_taking(o) != (1u << NSTRATEGIES) - 1)
    return pick_among(A, o, be, prec, fe_strategies_taking(o), out, why, nwhy);
  /* chosen before (every action of a solve asks), unless autotune = "again" asks anew */
  const int again = o && o->autotune == FE_AUTOTUNE_AGAIN;
  int k = 0;
  while (k < A->npick && !(A->pick[k].be == be && A->pick[k].prec == prec)) k++;
  if (k < A->npick && !again) {
    *out = A->pick[k].st;
    snprintf(why, nwhy, "%s", A->pick[k].why);
    return 0;
  }
  FE_CHECK(choose_default(A, be, prec, o ? o->autotune : FE_AUTOTUNE_AUTO, out, why, nwhy));
  if (k < (int)(sizeof A->pick / sizeof A->pick[0])) {
    A->pick[k].be = be;
    A->pick[k].prec = prec;
    A->pick[k].st = *out;
    snprintf(A->pick[k].why, sizeof A->pick[k].why, "%s", why);
    if (k == A->npick) A->npick++;
  }
  return 0;
}

/* Autotuning's candidates: within this factor of the model's fastest apply. Wide, since the
 * trials are for the cases the model gets wrong, by several times at worst
 * (docs/benchmarks.md); a strategy predicted slower still is not worth its setup. One that
 * stores the Jacobian's entries (csr, ebe) on an element of more than AUTOTUNE_STORED_NBASIS
 * basis functions within the narrower factor: its trial's setup is an assembly of
 * nbasis^2 entries a cell (Q3 on 32^3 distorted hexes, 912k dofs, one thread on a 2-core
 * EPYC: csr predicted 7.7x sumfact's apply, ebe 4.6x, measured 5.3x and 11x; their trials
 * made the first apply 16 s, 0.30 s without them). Where csr wins (P1, P2 and Q1, 4 to 10
 * basis functions) its estimate before the assembly is high (2-4x the nonzeros on P1 tets):
 * on the H200 Q1's uniform box had it 2x beyond the fastest prediction and 2.5x faster
 * measured, so those keep the wide factor. */
#define AUTOTUNE_FACTOR 10.0
#define AUTOTUNE_STORED_FACTOR 2.0
#define AUTOTUNE_STORED_NBASIS 10

/* Whether r was made for its strategy's defaults (as the trials ask: every option 0). */
static int asked_defaults(const fe_realization *r)
{
  const unsigned char *b = r->opts;
  for (size_t i = 0; i < r->st->options_size; i++)
    if (b[i]) return 0;
  return 1;
}

/* A split space's ranks agree (no-ops alone): a candidate out where it failed on any rank,
 * the rounds' time and each candidate's the slowest rank's. */
static int agree_failed(int split, int *ok, int nc)
{
  if (!split) return 0;
  int bad[NSTRATEGIES];
  for (int i = 0; i < nc; i++) bad[i] = !ok[i];
  FE_CHECK(fe_comm_max_int(bad, nc));
  for (int i = 0; i < nc; i++) ok[i] = !bad[i];
  return 0;
}

/* Time the apply of each candidate (a first run sets it up, then the best of three rounds of
 * one run each, or of up to ten while they take less than 50 ms a candidate, counts); the
 * fastest is *out, why lists the times; the others' device data are dropped. A candidate
 * that fails (out of memory, say) loses; an interrupt stops the trials. A split space's
 * ranks run the same rounds of the same candidates (each apply exchanges with the
 * neighbours) and take the same one: a candidate's time is its slowest rank's. */
static int autotune_trials(fe_operator *A, fe_backend *be, fe_precision prec,
                           const fe_strategy *const *cand, int nc, const fe_strategy **out,
                           char *times, size_t nt)
{
  const fe_dist *dist = A->V->dist;
  const int split = dist && dist->size > 1;
  fe_vector *w = NULL, *y = NULL;
  FE_CHECK(fe_vector_create(be, prec, A->V->ndofs, &w));
  int rc = fe_vector_fill(w, 1.0);
  double best = INFINITY, t[NSTRATEGIES], spent = 0;
  int ok[NSTRATEGIES];
  fe_action_opts o[NSTRATEGIES];
  *out = NULL;
  for (int i = 0; !rc && i < nc; i++) { /* each set up and compiled by a first run */
    fe_action_opts_default(&o[i]);
    o[i].backend = be->name;
    o[i].precision = (int)prec;
    o[i].strategy = cand[i]->name;
    o[i].nolog = 1;
    fe_report rep;
    t[i] = INFINITY;
    int trc = fe_operator_apply(A, w, NULL, &o[i], &y, &rep);
    ok[i] = !trc;
    if (trc == FE_ERR_INTERRUPTED) rc = trc;
    else if (trc) fe_error_clear(); /* it loses */
  }
  if (!rc) rc = agree_failed(split, ok, nc);
  /* then rounds of one run each, in turn, so that a passing load weighs on all alike: three,
   * and more while they are short (up to ten in 50 ms a candidate) */
  for (int k = 0; !rc && (k < 3 || (k < 10 && spent < 0.05 * nc)); k++) {
    for (int i = 0; !rc && i < nc; i++) {
      if (!ok[i]) continue;
      fe_report rep;
      int trc = fe_operator_apply(A, w, NULL, &o[i], &y, &rep);
      if (trc == FE_ERR_INTERRUPTED) rc = trc;
      else if (trc) fe_error_clear(), ok[i] = 0, t[i] = INFINITY;
      else {
        if (rep.seconds < t[i]) t[i] = rep.seconds;
        spent += rep.seconds;
      }
    }
    if (!rc) rc = agree_failed(split, ok, nc); /* the round's end: the ranks' */
    if (!rc && split) rc = fe_comm_max_double(&spent, 1);
  }
  if (!rc && split) rc = fe_comm_max_double(t, nc); /* the slowest rank's */
  for (int i = 0; i < nc; i++)
    if (ok[i] && t[i] < best) best = t[i], *out = cand[i];
  fe_vector_free(w);
  fe_vector_free(y);
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  FE_ASSERT(*out, FE_ERR_ARG, "autotune: no strategy ran the apply of %s on %s", A->V->name,
            be->name);
  int len = 0;
  times[0] = 0;
  for (int i = 0; i < nc; i++) {
    if (len >= 0 && (size_t)len < nt)
      len += snprintf(times + len, nt - (size_t)len, "%s%s %.3g ms", i ? ", " : "", cand[i]->name,
                      t[i] * 1e3);
    if (cand[i] == *out) continue;
    for (int k = A->nreal - 1; k >= 0; k--) /* the trials' own realizations of the losers */
      if (k < A->nreal && A->real[k]->st == cand[i] && A->real[k]->be == be &&
          A->real[k]->prec == prec && asked_defaults(A->real[k]))
        fe_realization_drop(A, A->real[k]);
  }
  return 0;
}

/* The cached autotune choice of key into *st (NULL: none that applies here). A split space's
 * ranks take rank 0's, and none unless it applies on every rank. */
static int cached_choice(fe_operator *A, fe_backend *be, fe_precision prec, const char *key,
                         int split, const fe_strategy **st, char *times, size_t nt)
{
  char name[64] = "", reason[256];
  int found = (!split || fe_comm_rank() == 0) &&
              fe_autotune_lookup(be, key, name, sizeof name, times, nt);
  if (split) {
    FE_CHECK(fe_comm_bcast(&found, sizeof found, 0));
    FE_CHECK(fe_comm_bcast(name, sizeof name, 0));
    FE_CHECK(fe_comm_bcast(times, nt, 0));
  }
  *st = found ? fe_strategy_find(name) : NULL;
  int no = !*st || !strategy_applies(*st, A, be, prec, reason, sizeof reason);
  if (split) FE_CHECK(fe_comm_max_int(&no, 1));
  if (no) *st = NULL;
  return 0;
}

/* The candidates to time: the strategies that apply, within a factor of the model's fastest
 * (or measured the default here). A split space's: those that apply on every rank and are
 * candidates on any. */
static int autotune_candidates(fe_operator *A, fe_backend *be, fe_precision prec, int split,
                               const fe_strategy **cand, int *nc)
{
  char reason[256];
  double pred[NSTRATEGIES], fastest = INFINITY;
  int out[NSTRATEGIES], in[NSTRATEGIES]; /* (the ranks' flags, by strategy_list's order) */
  for (int i = 0; i < NSTRATEGIES; i++) {
    const fe_strategy *s = strategy_list[i];
    out[i] = !strategy_applies(s, A, be, prec, reason, sizeof reason), in[i] = 0;
    pred[i] = out[i] ? INFINITY : strategy_predict(s, A, be, prec, FE_ACTION_APPLY);
    if (pred[i] < fastest) fastest = pred[i];
  }
  for (int i = 0; i < NSTRATEGIES; i++) {
    const fe_strategy *s = strategy_list[i];
    in[i] = !out[i] &&
            (pred[i] <= (s->stores_matrix && A->V->elem.nbasis > AUTOTUNE_STORED_NBASIS
                             ? AUTOTUNE_STORED_FACTOR : AUTOTUNE_FACTOR) * fastest ||
             (s->measured && s->measured(A, be, prec, reason, sizeof reason) > 0));
  }
  if (split) {
    FE_CHECK(fe_comm_max_int(out, NSTRATEGIES));
    FE_CHECK(fe_comm_max_int(in, NSTRATEGIES));
  }
  *nc = 0;
  for (int i = 0; i < NSTRATEGIES; i++)
    if (in[i] && !out[i]) cand[(*nc)++] = strategy_list[i];
  return 0;
}

/* The default by autotuning: cached (unless asked again), or the trials' fastest, stored (a
 * split space's by rank 0: the same choice on every rank). */
static int choose_autotuned(fe_operator *A, fe_backend *be, fe_precision prec, int again,
                            const fe_strategy **out, char *why, size_t nwhy)
{
  const fe_dist *dist = A->V->dist;
  const int split = dist && dist->size > 1;
  char key[256], times[256] = "";
  fe_autotune_key(A, be, prec, key, sizeof key);
  const fe_strategy *st = NULL;
  if (!again) FE_CHECK(cached_choice(A, be, prec, key, split, &st, times, sizeof times));
  if (st) {
    *out = st;
    snprintf(why, nwhy, "default: measured fastest (autotune, cached: %s)", times);
    return 0;
  }
  const fe_strategy *cand[NSTRATEGIES];
  int nc = 0;
  FE_CHECK(autotune_candidates(A, be, prec, split, cand, &nc));
  FE_CHECK(autotune_trials(A, be, prec, cand, nc, out, times, sizeof times));
  if (!split || fe_comm_rank() == 0) fe_autotune_store(be, key, (*out)->name, times);
  snprintf(why, nwhy, "default: measured fastest (autotune%s: %s)",
           split ? ", the slowest rank's" : "", times);
  return 0;
}

/* The default: a strategy that measurements made the default here, else the one the model
 * predicts fastest for the Jacobian action, leaving out those measured slower here; with
 * autotuning (engine/operator/autotune.h), the one measured fastest here, now or in an earlier session. */
static int choose_default(fe_operator *A, fe_backend *be, fe_precision prec, int autotune,
                          const fe_strategy **out, char *why, size_t nwhy)
{
  char reason[256];
  if (fe_autotune_wanted(A, autotune))
    return choose_autotuned(A, be, prec, autotune == FE_AUTOTUNE_AGAIN, out, why, nwhy);
  for (int i = 0; i < NSTRATEGIES; i++) {
    const fe_strategy *st = strategy_list[i];
    if (st->measured && strategy_applies(st, A, be, prec, reason, sizeof reason) &&
        st->measured(A, be, prec, reason, sizeof reason) > 0) {
      *out = st;
      snprintf(why, nwhy, "default: %s", reason);
      return 0;
    }
  }
  const fe_strategy *best = NULL;
  double tbest = 0;
  int len = snprintf(why, nwhy, "default: predicted fastest (apply:");
  for (int i = 0; i < NSTRATEGIES; i++) {
    const fe_strategy *st = strategy_list[i];
    if (!strategy_applies(st, A, be, prec, reason, sizeof reason)) continue;
    if (st->measured && st->measured(A, be, prec, reason, sizeof reason) < 0) continue;
    double t = strategy_predict(st, A, be, prec, FE_ACTION_APPLY);
    if (len > 0 && (size_t)len < nwhy)
      len += snprintf(why + len, nwhy - (size_t)len, " %s %.3g ms", st->name, t * 1e3);
    if (!best || t < tbest) {
      best = st;
      tbest = t;
    }
  }
  if (len > 0 && (size_t)len < nwhy) snprintf(why + len, nwhy - (size_t)len, ")");
  FE_ASSERT(best, FE_ERR_ARG, "no strategy applies to %s on %s (A:strategies() says why)",
            A->V->name, be->name);
  *out = best;
  return 0;
}

int fe_operator_strategy_info(fe_operator *A, const fe_action_opts *o, fe_strategy_info *info,
                              int max, int *n)
{
  fe_backend *be;
  fe_precision prec;
  FE_CHECK(fe_operator_resolve(o, &be, &prec));
  const fe_strategy *pick = NULL;
  char why[160] = "", reason[256];
  int any = 0; /* where none applies there is no default, and each strategy's why says why */
  for (int i = 0; i < NSTRATEGIES && !any; i++)
    any = strategy_applies(strategy_list[i], A, be, prec, reason, sizeof reason);
  fe_action_opts plain;
  fe_action_opts_default(&plain);
  plain.backend = o ? o->backend : NULL;
  plain.precision = (int)prec;
  if (any) FE_CHECK(fe_operator_pick_strategy(A, &plain, be, prec, &pick, why, sizeof why));
  *n = 0;
  for (int i = 0; i < NSTRATEGIES && *n < max; i++) {
    const fe_strategy *st = strategy_list[i];
    fe_strategy_info *f = &info[(*n)++];
    memset(f, 0, sizeof *f);
    f->name = st->name;
    f->summary = st->summary;
    f->applies = strategy_applies(st, A, be, prec, f->why, sizeof f->why);
    f->is_default = st == pick;
    if (f->applies) {
      f->predicted_seconds = strategy_predict(st, A, be, prec, FE_ACTION_APPLY);
      char note[256] = "applies";
      if (st->measured && st->measured(A, be, prec, note, sizeof note) == 0)
        snprintf(note, sizeof note, "applies");
      snprintf(f->why, sizeof f->why, "%s", f->is_default ? why : note);
    }
  }
  return 0;
}
