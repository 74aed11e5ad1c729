/* felab action options: what a strategy takes beyond where an action runs. They reach the
 * engine as a small list of name/value pairs (a number, a string or a boolean), which the
 * shell copies out of a Lua table, so the engine stays free of Lua. Each strategy names the
 * options it takes, reads their values with the helpers below (an error names the option,
 * its value and what it must be) and says which of them are the same in effect, as PETSc's
 * PCSetFromOptions_XXX reads a preconditioner's own options (engine/operator/strategy.h). */
#ifndef FE_OPTIONS_H
#define FE_OPTIONS_H

#include <stddef.h>

typedef enum { FE_OPTION_NUMBER, FE_OPTION_STRING, FE_OPTION_BOOLEAN, FE_OPTION_OTHER } fe_option_kind;

#define FE_OPTION_TEXT 32
#define FE_OPTIONS_MAX 16

/* One given option. Self-contained (no pointer into the caller's memory but name, which
 * points to a strategy's own static list), so a list may be copied and kept. */
typedef struct fe_option {
  const char *name;          /* one of the strategies' option names (fe_action_option_name) */
  fe_option_kind kind;
  double number;             /* FE_OPTION_NUMBER */
  int boolean;               /* FE_OPTION_BOOLEAN */
  char text[FE_OPTION_TEXT]; /* FE_OPTION_STRING: the string (longer ones cut, so they match
                              * no name); FE_OPTION_OTHER: its kind ("table") for messages */
} fe_option;

/* The options given to one call, in no particular order, each name once. */
typedef struct fe_options {
  int n;
  fe_option item[FE_OPTIONS_MAX];
} fe_options;

/* The option called name in g, or NULL. */
const fe_option *fe_options_find(const fe_options *g, const char *name);
/* Option name as an integer in lo..hi (pow2: also 0 or a power of two) into *v when given,
 * else *v is kept. must says what it must be, for the error:
 *   "<caller>: walk = 9.5: walk must be <must>". */
int fe_option_integer(const fe_options *g, const char *caller, const char *name, int lo, int hi,
                      int pow2, const char *must, int *v);
/* Option name as one of the n strings choices (the index into *v) when given. */
int fe_option_choice(const fe_options *g, const char *caller, const char *name,
                     const char *const *choices, int n, const char *must, int *v);
/* Option name as a boolean (1 or 0 into *v) when given. */
int fe_option_boolean(const fe_options *g, const char *caller, const char *name,
                      const char *must, int *v);
/* "walk = 9.5", "scatter = \"colour\"", "recompute = a table": an option as its call wrote it. */
void fe_option_format(const fe_option *opt, char *buf, size_t n);

/* Option name set in g to a number, a string or a boolean, as a shell sets what its caller
 * wrote (for an engine caller, a test): replaced when g has it, else added (an error past
 * FE_OPTIONS_MAX). name must outlive g (a string constant, or a strategy's own list). */
int fe_options_number(fe_options *g, const char *name, double v);
int fe_options_string(fe_options *g, const char *name, const char *text);
int fe_options_boolean(fe_options *g, const char *name, int v);
/* Whether name is in the NULL-ended list names. */
int fe_options_has(const char *const *names, const char *name);

#endif
