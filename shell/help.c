/* felab's help system: help() at the prompt.
 *
 * Entries are keyed like the Lua surface: "mesh.box" for a module function,
 * "felab.mesh" for an object type (named by its metatable's __name), "felab.mesh:tags"
 * for a method. The texts of the whole contract live in shell/help-text.c; binding files
 * add or replace entries with felab_help_add. help(x) finds its entry at call time
 * by walking the module tables and the type metatables, so it also tells which functions
 * exist in this build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "shell/help-private.h"
#include "shell/shell.h"

/* The modules, in the order help() lists them, with their one-line summaries. */
static const struct {
  const char *name;
  const char *summary;
} modules[] = {
    {"mesh", "meshes: the built-in box generator, cell and boundary tags"},
    {"fe", "function spaces, operators and their actions (residual, apply, diagonal)"},
    {"physics", "pointwise physics: Poisson and friends"},
    {"solve", "matrix-free solvers: solve.cg, solve.bicg, solve.bicgstab, solve.gmres, "
              "solve.newton; preconditioners: solve.precond"},
    {"device", "backends (cpu, opencl, cuda): list, choose, calibrate, describe"},
    {"perf", "the session's performance log: every call, predicted vs measured"},
    {"export", "files for other tools: export.vtu for ParaView"},
};
#define NMODULES (sizeof modules / sizeof modules[0])

/* The object types, searched for methods. */
static const char *const types[] = {FELAB_MESH,     FELAB_SPACE,  FELAB_VECTOR,   FELAB_PHYSICS,
                                    FELAB_OPERATOR, FELAB_REPORT, FELAB_ELEMATS,  FELAB_MATRIX,
                                    "felab.symbol", "felab.precond"};
#define NTYPES (sizeof types / sizeof types[0])

static help_entry *added; /* entries from felab_help_add, newest wins */
static size_t nadded, added_cap;

/* Copy a string, NULL on NULL or failure. */
static char *copy_string(const char *s)
{
  return s ? strdup(s) : NULL;
}

/* Register (or replace) the entry of key; the strings are copied. */
void felab_help_add(const char *key, const char *signature, const char *text)
{
  if (!key) return;
  help_entry *e = NULL;
  for (size_t i = 0; i < nadded; i++)
    if (!strcmp(added[i].key, key)) e = &added[i];
  if (!e) {
    if (nadded == added_cap) {
      size_t cap = added_cap ? 2 * added_cap : 32;
      help_entry *grown = realloc(added, cap * sizeof *grown);
      if (!grown) return;
      added = grown;
      added_cap = cap;
    }
    e = &added[nadded];
    e->key = copy_string(key);
    if (!e->key) return;
    nadded++;
  } else {
    free((char *)e->signature);
    free((char *)e->text);
  }
  e->signature = copy_string(signature);
  e->text = copy_string(text);
}

/* The entry of key (added ones first), or NULL. */
static const help_entry *help_find(const char *key)
{
  for (size_t i = nadded; i-- > 0;)
    if (!strcmp(added[i].key, key)) return &added[i];
  for (size_t i = 0; i < felab_help_nbuiltin; i++)
    if (!strcmp(felab_help_builtin[i].key, key)) return &felab_help_builtin[i];
  return NULL;
}

/* ----- a sorted list of names ----- */

typedef struct name_list {
  char **v;
  size_t n, cap;
} name_list;

/* Add a name unless it is there already. */
static void names_add(name_list *l, const char *s, size_t len)
{
  for (size_t i = 0; i < l->n; i++)
    if (strlen(l->v[i]) == len && !strncmp(l->v[i], s, len)) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 32;
    char **grown = realloc(l->v, cap * sizeof *grown);
    if (!grown) return;
    l->v = grown;
    l->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (!copy) return;
  memcpy(copy, s, len);
  copy[len] = '\0';
  l->v[l->n++] = copy;
}

/* qsort comparison of two names. */
static int names_compare(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Free the names. */
static void names_free(name_list *l)
{
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

/* Add the string keys of the table at index t whose values are functions; skip "__"
 * names (metamethods) when nometa. */
static void names_add_functions(lua_State *L, int t, name_list *l, int nometa)
{
  t = lua_absindex(L, t);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TFUNCTION) {
      size_t len;
      const char *k = lua_tolstring(L, -2, &len);
      if (!(nometa && k[0] == '_' && k[1] == '_')) names_add(l, k, len);
    }
    lua_pop(L, 1);
  }
}

/* Add the suffixes of registered keys "<prefix><name>" whose name has no further '.' or
 * ':' (the registered functions of a module, or the methods of a type). */
static void names_add_registered(name_list *l, const char *prefix)
{
  size_t plen = strlen(prefix);
  for (size_t i = 0; i < nadded + felab_help_nbuiltin; i++) {
    const char *key = i < nadded ? added[i].key : felab_help_builtin[i - nadded].key;
    if (strncmp(key, prefix, plen) != 0) continue;
    const char *rest = key + plen;
    if (*rest && !strpbrk(rest, ".:")) names_add(l, rest, strlen(rest));
  }
}

/* ----- printing ----- */

/* Print the lines of text, each indented. */
static void print_indented(const char *text, const char *indent)
{
  while (text && *text) {
    const char *eol = strchr(text, '\n');
    int len = eol ? (int)(eol - text) : (int)strlen(text);
    printf("%s%.*s\n", indent, len, text);
    text = eol ? eol + 1 : text + len;
  }
}

/* Print one entry: the signature, then the text indented. */
static void print_entry(const help_entry *e)
{
  printf("%s\n", e->signature && *e->signature ? e->signature : e->key);
  print_indented(e->text, "  ");
}

/* Print the first sentence of text (a summary) on one line, indented, cut near 100
 * characters. A '.' ends it only at a line end or before a capital ("e.g." does not). */
static void print_summary(const char *text, const char *indent)
{
  char line[128];
  size_t n = 0;
  for (const char *p = text; p && *p && n < sizeof line - 1; p++) {
    if (!strncmp(p, "\nexample:", 9)) break;
    line[n++] = *p == '\n' ? ' ' : *p;
    /* a sentence ends at '.' before a line end, or before a space and a capital */
    if (*p == '.' && p > text && p[-1] != ' ' &&
        (p[1] == '\n' || p[1] == '\0' || (p[1] == ' ' && p[2] >= 'A' && p[2] <= 'Z')))
      break;
  }
  line[n] = '\0';
  if (n > 100) { /* cut at a word and say so */
    n = 97;
    while (n > 60 && line[n] != ' ') n--;
    snprintf(line + n, sizeof line - n, " ...");
  }
  printf("%s%s\n", indent, line);
}

/* Print a list of functions: "<prefix><name>" with signature and summary each, marking
 * registered ones that this build lacks (present == 0 for all of them). A type whose
 * metatable lists no methods (felab.symbol) may hand them out from an __index function:
 * there, absence cannot be told and nothing is marked. */
static void print_function_list(lua_State *L, int table, const char *prefix, int nometa)
{
  name_list present = {0}, all = {0};
  if (table) {
    names_add_functions(L, table, &present, nometa);
    for (size_t i = 0; i < present.n; i++) names_add(&all, present.v[i], strlen(present.v[i]));
  }
  int mark_absent = !(nometa && table && present.n == 0);
  names_add_registered(&all, prefix);
  if (all.n) qsort(all.v, all.n, sizeof *all.v, names_compare);
  for (size_t i = 0; i < all.n; i++) {
    char key[256];
    snprintf(key, sizeof key, "%s%s", prefix, all.v[i]);
    const help_entry *e = help_find(key);
    int here = 0;
    for (size_t j = 0; j < present.n; j++) here |= !strcmp(present.v[j], all.v[i]);
    printf("  %s%s\n", e && e->signature ? e->signature : key,
           here || !mark_absent ? "" : "   (not in this build)");
    if (e) print_summary(e->text, "      ");
  }
  if (all.n == 0) printf("  (none)\n");
  names_free(&present);
  names_free(&all);
}

/* help(): the modules and how to ask for more. */
static void help_overview(void)
{
  printf("felab %s: an interactive finite-element workbench (Lua 5.4)\n\nmodules:\n",
         FELAB_VERSION);
  for (size_t i = 0; i < NMODULES; i++) printf("  %-8s %s\n", modules[i].name, modules[i].summary);
  printf("\nmore:\n"
         "  help(mesh)        the functions of a module\n"
         "  help(mesh.box)    one function (also help(\"mesh.box\"))\n"
         "  help(m)           an object (a mesh, space, vector, operator, report): its fields\n"
         "                    and methods\n"
         "  show(t)           a table written out (the prompt prints values this way)\n"
         "  lesson()          the lessons, from a first solve to what binds on a GPU; lesson(1)\n"
         "                    runs the first step by step (help(\"lesson\"))\n"
         "example: m = mesh.box{cells = {8, 8, 8}, cell = \"tet\"}; print(m); help(m)\n");
}

/* help(module): its summary and functions; the module table is at index t (0: absent). */
static void help_module(lua_State *L, size_t mod, int t)
{
  char prefix[64];
  printf("%s: %s\n", modules[mod].name, modules[mod].summary);
  snprintf(prefix, sizeof prefix, "%s.", modules[mod].name);
  print_function_list(L, t, prefix, 0);
  printf("help(%s.NAME) for one of them.\n", modules[mod].name);
}

/* Push the methods table of type tname: its metatable's __index if that is a table, else
 * the metatable itself; nothing (returns 0) when the type is not registered. */
static int push_methods(lua_State *L, const char *tname)
{
  if (luaL_getmetatable(L, tname) != LUA_TTABLE) {
    lua_pop(L, 1);
    return 0;
  }
  if (lua_getfield(L, -1, "__index") == LUA_TTABLE) {
    lua_remove(L, -2);
    return 1;
  }
  lua_pop(L, 1);
  return 1;
}

/* help(object) or help("felab.mesh"): the type's entry and its methods. */
static void help_type(lua_State *L, const char *tname)
{
  const help_entry *e = help_find(tname);
  if (e) {
    printf("%s: ", tname);
    print_entry(e);
  } else {
    printf("%s: an object of felab (no help text yet)\n", tname);
  }
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s:", tname);
  int have = push_methods(L, tname);
  printf("methods:\n");
  print_function_list(L, have ? lua_gettop(L) : 0, prefix, 1);
  if (have) lua_pop(L, 1);
}

/* Find the module index of the table at idx among the global module tables; -1 if none. */
static int module_of_table(lua_State *L, int idx)
{
  idx = lua_absindex(L, idx);
  for (size_t i = 0; i < NMODULES; i++) {
    lua_getglobal(L, modules[i].name);
    int same = lua_rawequal(L, -1, idx);
    lua_pop(L, 1);
    if (same) return (int)i;
  }
  return -1;
}

/* Find the key of the function at idx: "module.field" or "type:method" (or "help",
 * "show", "lesson"), by walking the module tables and the type metatables. Writes "" when not found. */
static void function_key(lua_State *L, int idx, char *key, size_t n)
{
  idx = lua_absindex(L, idx);
  key[0] = '\0';
  static const char *const globals[] = {"help", "show", "lesson"};
  for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) {
    lua_getglobal(L, globals[i]);
    int same = lua_rawequal(L, -1, idx);
    lua_pop(L, 1);
    if (same) {
      snprintf(key, n, "%s", globals[i]);
      return;
    }
  }
  for (size_t pass = 0; pass < NMODULES + NTYPES && !key[0]; pass++) {
    const char *owner = pass < NMODULES ? modules[pass].name : types[pass - NMODULES];
    int found = pass < NMODULES ? lua_getglobal(L, owner) == LUA_TTABLE : push_methods(L, owner);
    if (pass < NMODULES && !found) {
      lua_pop(L, 1);
      continue;
    }
    if (!found) continue;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, idx)) {
        snprintf(key, n, "%s%s%s", owner, pass < NMODULES ? "." : ":", lua_tostring(L, -2));
        lua_pop(L, 2);
        break;
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* Say that there is no help for the value at idx. */
static void help_unknown(lua_State *L, int idx)
{
  const char *s = luaL_tolstring(L, idx, NULL);
  printf("no help for %s; try help()\n", s);
  lua_pop(L, 1);
}

/* help("key"): an entry, a module, or a type by name. */
static void help_string(lua_State *L, const char *s)
{
  for (size_t i = 0; i < NMODULES; i++)
    if (!strcmp(s, modules[i].name)) {
      int t = lua_getglobal(L, s) == LUA_TTABLE ? lua_gettop(L) : 0;
      help_module(L, i, t);
      lua_pop(L, 1);
      return;
    }
  char tname[128];
  snprintf(tname, sizeof tname, "%s%s", strncmp(s, "felab.", 6) ? "felab." : "", s);
  for (size_t i = 0; i < NTYPES; i++)
    if (!strcmp(tname, types[i])) {
      help_type(L, tname);
      return;
    }
  const help_entry *e = help_find(s);
  if (!e) e = help_find(tname); /* "vector:norm" for "felab.vector:norm" */
  if (e) {
    print_entry(e);
    return;
  }
  printf("no help for \"%s\"; try help()\n", s);
}

/* help([x]): print help about x (see the "help" entry). Returns nothing. */
static int help(lua_State *L)
{
  if (lua_gettop(L) == 0) {
    help_overview();
  } else if (lua_type(L, 1) == LUA_TSTRING) {
    help_string(L, lua_tostring(L, 1));
  } else if (lua_type(L, 1) == LUA_TFUNCTION) {
    char key[256];
    function_key(L, 1, key, sizeof key);
    const help_entry *e = key[0] ? help_find(key) : NULL;
    if (e) print_entry(e);
    else if (key[0]) printf("%s: a felab function (no help text yet)\n", key);
    else help_unknown(L, 1);
  } else {
    int mod = lua_type(L, 1) == LUA_TTABLE ? module_of_table(L, 1) : -1;
    if (mod >= 0) {
      help_module(L, (size_t)mod, 1);
    } else {
      char tname[128] = "";
      int kind = luaL_getmetafield(L, 1, "__name"); /* pushes nothing when absent */
      if (kind == LUA_TSTRING) snprintf(tname, sizeof tname, "%s", lua_tostring(L, -1));
      if (kind != LUA_TNIL) lua_pop(L, 1);
      if (!strncmp(tname, "felab.", 6) || (tname[0] && help_find(tname))) help_type(L, tname);
      else help_unknown(L, 1);
    }
  }
  fflush(stdout);
  return 0;
}

/* Push the help function (the module "help" of felab_open_all). */
int felab_open_help(lua_State *L)
{
  lua_pushcfunction(L, help);
  return 1;
}
