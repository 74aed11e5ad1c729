/* felab strategies' options: what the strategy table says about them as a whole (the names
 * every strategy takes, which strategies take a name, the check that a call gave a strategy
 * only its own) and the readers of the options several strategies share: block, geometry and
 * fold. Each strategy reads the rest itself (its read_options slot, engine/operator/strategy.h). */
#include <stdio.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/operator/qdata.h"
#include "engine/operator/strategy.h"

const char *fe_action_option_name(int i)
{
  int k = 0;
  for (int s = 0; s < fe_strategy_count(); s++) {
    const fe_strategy *st = fe_strategy_at(s);
    for (int j = 0; st->options && st->options[j]; j++) {
      int seen = 0; /* taken by an earlier strategy: counted there */
      for (int e = 0; e < s && !seen; e++) seen = fe_options_has(fe_strategy_at(e)->options, st->options[j]);
      for (int e = 0; e < j && !seen; e++) seen = !strcmp(st->options[e], st->options[j]);
      if (!seen && k++ == i) return st->options[j];
    }
  }
  return NULL;
}

int fe_action_option_takers(const char *name, char *buf, size_t n)
{
  int k = 0;
  size_t len = 0;
  buf[0] = 0;
  for (int s = 0; s < fe_strategy_count(); s++) {
    const fe_strategy *st = fe_strategy_at(s);
    if (!fe_options_has(st->options, name)) continue;
    if (len < n) len += (size_t)snprintf(buf + len, n - len, "%s%s", k ? ", " : "", st->name);
    k++;
  }
  return k;
}

int fe_strategy_option_names(const char *strategy, char *buf, size_t n)
{
  const fe_strategy *st = fe_strategy_find(strategy);
  FE_ASSERT(st, FE_ERR_ARG, "unknown strategy '%s'", strategy);
  size_t len = 0;
  buf[0] = 0;
  for (int j = 0; st->options && st->options[j] && len < n; j++)
    len += (size_t)snprintf(buf + len, n - len, "%s%s", j ? ", " : "", st->options[j]);
  return 0;
}

unsigned fe_strategies_taking(const fe_action_opts *o)
{
  unsigned all = (1u << fe_strategy_count()) - 1, mask = all;
  const fe_options *g = o ? o->given : NULL;
  for (int i = 0; g && i < g->n; i++)
    for (int s = 0; s < fe_strategy_count(); s++)
      if (!fe_options_has(fe_strategy_at(s)->options, g->item[i].name)) mask &= ~(1u << s);
  return mask;
}

int fe_strategy_check_given(const fe_strategy *st, const fe_action_opts *o)
{
  const fe_options *g = o ? o->given : NULL;
  const char *caller = o && o->caller ? o->caller : NULL;
  for (int i = 0; g && i < g->n; i++) {
    const char *name = g->item[i].name;
    if (fe_options_has(st->options, name)) continue;
    char takers[128], own[128];
    int k = fe_action_option_takers(name, takers, sizeof takers);
    fe_strategy_option_names(st->name, own, sizeof own);
    FE_ERROR(FE_ERR_ARG, "%s%soption %s is not an option of strategy %s; %s%s%s (%s takes %s)",
             caller ? caller : "", caller ? ": " : "", name, st->name,
             k > 1 ? "strategies " : k ? "strategy " : "no strategy takes it", takers,
             k > 1 ? " take it" : k ? " takes it" : "", st->name, *own ? own : "no options");
  }
  return 0;
}

int fe_read_block(const fe_options *g, const char *caller, int *block)
{
  return fe_option_integer(g, caller, "block", 0, 1 << 30, 0,
                           "an integer >= 0 (cells per work group, 0: automatic)", block);
}

int fe_read_geometry(const fe_options *g, const char *caller, int *geometry)
{
  static const char *const names[] = {"auto", "stored", "vertices", "unshared"};
  return fe_option_choice(g, caller, "geometry", names, 4,
                          "\"stored\" (factors stored: a set a class of congruent cells where "
                          "the mesh has them, else a set a cell or point), \"unshared\" (a set "
                          "a cell or point always), \"vertices\" (from the cell's corners) or "
                          "\"auto\"",
                          geometry); /* FE_GEOMETRY_AUTO, _STORED, _VERTICES, _UNSHARED */
}

int fe_read_fold(const fe_options *g, const char *caller, int *fold)
{
  static const char *const names[] = {"auto"};
  const fe_option *f = fe_options_find(g, "fold");
  int on = 0, rc = 0, what = FE_FOLD_AUTO;
  const char *must = "true (the Jacobian action's per-point data made once at setup: geometry "
                     "and coefficients of x folded together), false (evaluated at every point "
                     "in every action) or \"auto\"";
  if (!f) return 0;
  if (f->kind == FE_OPTION_BOOLEAN) rc = fe_option_boolean(g, caller, "fold", must, &on);
  else rc = fe_option_choice(g, caller, "fold", names, 1, must, &what);
  FE_CHECK(rc);
  *fold = f->kind == FE_OPTION_BOOLEAN ? (on ? FE_FOLD_ON : FE_FOLD_OFF) : what;
  return 0;
}

const char *fe_geometry_key(const fe_operator *A, int geometry, int vertices)
{
  return vertices ? "vertices" : fe_geometry_shared(A, geometry) ? "shared" : "stored";
}

const char *fe_fold_key(const fe_operator *A, int fold)
{
  int folds = 0;
  if (fe_qdata_folds(A, fold, &folds)) {
    fe_error_clear(); /* the setup says why */
    return "?";
  }
  return folds ? "on" : "off";
}
