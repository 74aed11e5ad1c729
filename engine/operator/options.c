/* felab action options: the helpers a strategy reads its own options with (engine/operator/options.h).
 * An error names the call, the option as it was written and what it must be:
 *   "A:apply: lanes = 12: lanes must be 0 or a power of two up to 64 (...)". */
#include "engine/operator/options.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/error.h"

const fe_option *fe_options_find(const fe_options *g, const char *name)
{
  for (int i = 0; g && i < g->n; i++)
    if (!strcmp(g->item[i].name, name)) return &g->item[i];
  return NULL;
}

int fe_options_has(const char *const *names, const char *name)
{
  for (int i = 0; names && names[i]; i++)
    if (!strcmp(names[i], name)) return 1;
  return 0;
}

void fe_option_format(const fe_option *opt, char *buf, size_t n)
{
  switch (opt->kind) {
  case FE_OPTION_NUMBER: snprintf(buf, n, "%s = %.14g", opt->name, opt->number); break;
  case FE_OPTION_STRING: snprintf(buf, n, "%s = \"%s\"", opt->name, opt->text); break;
  case FE_OPTION_BOOLEAN: snprintf(buf, n, "%s = %s", opt->name, opt->boolean ? "true" : "false"); break;
  default: snprintf(buf, n, "%s = a %s", opt->name, opt->text); break;
  }
}

/* The error for an option whose value is not what it must be. */
static int option_error(const fe_option *opt, const char *caller, const char *must)
{
  char given[FE_OPTION_TEXT + 48];
  fe_option_format(opt, given, sizeof given);
  return fe_error_set(FE_ERR_ARG, __FILE__, __LINE__, __func__, "%s%s%s: %s must be %s",
                      caller ? caller : "", caller ? ": " : "", given, opt->name, must);
}

int fe_option_integer(const fe_options *g, const char *caller, const char *name, int lo, int hi,
                      int pow2, const char *must, int *v)
{
  const fe_option *opt = fe_options_find(g, name);
  if (!opt) return 0;
  double x = opt->kind == FE_OPTION_NUMBER ? opt->number : NAN;
  if (!(x >= lo && x <= hi && x == floor(x))) return option_error(opt, caller, must);
  int i = (int)x;
  if (pow2 && (i < 0 || (i & (i - 1)))) return option_error(opt, caller, must);
  *v = i;
  return 0;
}

int fe_option_choice(const fe_options *g, const char *caller, const char *name,
                     const char *const *choices, int n, const char *must, int *v)
{
  const fe_option *opt = fe_options_find(g, name);
  if (!opt) return 0;
  for (int i = 0; opt->kind == FE_OPTION_STRING && i < n; i++)
    if (choices[i] && !strcmp(opt->text, choices[i])) {
      *v = i;
      return 0;
    }
  return option_error(opt, caller, must);
}

int fe_option_boolean(const fe_options *g, const char *caller, const char *name,
                      const char *must, int *v)
{
  const fe_option *opt = fe_options_find(g, name);
  if (!opt) return 0;
  if (opt->kind != FE_OPTION_BOOLEAN) return option_error(opt, caller, must);
  *v = opt->boolean;
  return 0;
}

/* The slot of name in g: its own, or a new one at the end. */
static fe_option *option_slot(fe_options *g, const char *name)
{
  for (int i = 0; i < g->n; i++)
    if (!strcmp(g->item[i].name, name)) return &g->item[i];
  if (g->n == FE_OPTIONS_MAX) return NULL;
  fe_option *opt = &g->item[g->n++];
  memset(opt, 0, sizeof *opt);
  opt->name = name;
  return opt;
}

int fe_options_number(fe_options *g, const char *name, double v)
{
  fe_option *opt = option_slot(g, name);
  FE_ASSERT(opt, FE_ERR_ARG, "option %s: a call takes at most %d options", name, FE_OPTIONS_MAX);
  opt->kind = FE_OPTION_NUMBER;
  opt->number = v;
  return 0;
}

int fe_options_string(fe_options *g, const char *name, const char *text)
{
  fe_option *opt = option_slot(g, name);
  FE_ASSERT(opt, FE_ERR_ARG, "option %s: a call takes at most %d options", name, FE_OPTIONS_MAX);
  opt->kind = FE_OPTION_STRING;
  snprintf(opt->text, sizeof opt->text, "%s", text);
  return 0;
}

int fe_options_boolean(fe_options *g, const char *name, int v)
{
  fe_option *opt = option_slot(g, name);
  FE_ASSERT(opt, FE_ERR_ARG, "option %s: a call takes at most %d options", name, FE_OPTIONS_MAX);
  opt->kind = FE_OPTION_BOOLEAN;
  opt->boolean = v != 0;
  return 0;
}
