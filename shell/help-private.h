/* Private to shell/help.c (the machinery: finding an entry, listing, printing) and
 * shell/help-text.c (the texts): what one entry is, and the contract's entries. Nothing else
 * includes it; the binding files add entries through felab_help_add (shell.h). */
#ifndef FE_SHELL_HELP_PRIVATE_H
#define FE_SHELL_HELP_PRIVATE_H

#include <stddef.h>

/* One entry: what help prints for one key. */
typedef struct help_entry {
  const char *key;       /* "mesh.box", "felab.mesh", "felab.mesh:tags", "help" */
  const char *signature; /* how to call it, or for a type its fields and methods */
  const char *text;      /* what it does, 2 to 6 lines, the last an example */
} help_entry;

/* shell/help-text.c: the texts of the whole contract, and how many there are. */
extern const help_entry felab_help_builtin[];
extern const size_t felab_help_nbuiltin;

#endif
