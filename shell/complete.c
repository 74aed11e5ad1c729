/* felab shell: tab completion at the prompt (readline). The word before the cursor is
 * completed as a global, a field (after '.') or a method (after ':'), from the keys of the
 * tables it names and of their metatables' __index tables: a walk of raw fields only, so no
 * user code (no __index function) runs while the user types. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "shell/shell.h"

#ifdef FE_HAVE_READLINE
#include <stdio.h> /* readline.h needs FILE */
#include <readline/readline.h>

static lua_State *complete_state;      /* the session's state, whose globals are completed */
static char **completions;            /* candidates of the completion in progress */
static size_t ncompletions, completion_next, completion_cap;

/* Forget the previous candidates. */
static void completion_reset(void)
{
  for (size_t i = 0; i < ncompletions; i++) free(completions[i]);
  ncompletions = completion_next = 0;
}

/* Add a candidate made of prefix (n bytes) + name. */
static void completion_add(const char *prefix, size_t n, const char *name)
{
  if (ncompletions == completion_cap) {
    size_t cap = completion_cap ? 2 * completion_cap : 64;
    char **grown = realloc(completions, cap * sizeof *grown);
    if (!grown) return;
    completions = grown;
    completion_cap = cap;
  }
  size_t len = strlen(name);
  char *s = malloc(n + len + 1);
  if (!s) return;
  memcpy(s, prefix, n);
  memcpy(s + n, name, len + 1);
  completions[ncompletions++] = s;
}

/* Whether s[0..n) is a Lua identifier. */
static int is_identifier(const char *s, size_t n)
{
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9')))
      return 0;
  return 1;
}

/* Replace the value on top by its metatable's __index (raw), or by nil. */
static void complete_step_index(lua_State *L)
{
  if (!lua_getmetatable(L, -1)) {
    lua_pop(L, 1);
    lua_pushnil(L);
    return;
  }
  lua_pushliteral(L, "__index");
  lua_rawget(L, -2);
  lua_remove(L, -2); /* metatable */
  lua_remove(L, -2); /* old value */
}

/* Replace the value on top by its field key[0..n): raw, then through __index tables; nil
 * when there is none. No metamethod runs. */
static void complete_field(lua_State *L, const char *key, size_t n)
{
  for (int depth = 0; depth < 8 && !lua_isnil(L, -1); depth++) {
    if (lua_istable(L, -1)) {
      lua_pushlstring(L, key, n);
      if (lua_rawget(L, -2) != LUA_TNIL) {
        lua_remove(L, -2);
        return;
      }
      lua_pop(L, 1);
    }
    complete_step_index(L);
  }
  lua_pop(L, 1);
  lua_pushnil(L);
}

/* Copy the identifier keys of table t into result table res as name -> type name; with
 * methods only functions; with nometa no "__" names. Earlier entries win. */
static void complete_keys(lua_State *L, int t, int res, int methods, int nometa)
{
  lua_pushnil(L);
  while (lua_next(L, t)) {
    size_t n;
    const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &n) : NULL;
    if (k && is_identifier(k, n) && !(nometa && k[0] == '_' && k[1] == '_') &&
        (!methods || lua_type(L, -1) == LUA_TFUNCTION)) {
      lua_pushvalue(L, -2);
      if (lua_rawget(L, res) == LUA_TNIL) {
        lua_pushvalue(L, -3);
        lua_pushstring(L, luaL_typename(L, -3));
        lua_rawset(L, res);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* Protected: walk path ("a.b", "" for the globals) through raw fields and __index tables
 * (no user code runs), then return a table name -> type name of the keys found there, in
 * its __index tables, or for an __index function in the metatable. Arg 2: methods only. */
static int complete_collect(lua_State *L)
{
  size_t plen;
  const char *path = luaL_checklstring(L, 1, &plen);
  int methods = lua_toboolean(L, 2);
  lua_settop(L, 2);
  lua_newtable(L); /* 3: result */
  lua_pushglobaltable(L);
  for (size_t at = 0; at < plen;) {
    const char *dot = memchr(path + at, '.', plen - at);
    size_t n = dot ? (size_t)(dot - (path + at)) : plen - at;
    complete_field(L, path + at, n);
    at += n + 1;
  }
  for (int depth = 0; depth < 8 && !lua_isnil(L, -1); depth++) {
    if (lua_istable(L, -1)) complete_keys(L, lua_gettop(L), 3, methods, depth > 0);
    if (!lua_getmetatable(L, -1)) break;
    lua_pushliteral(L, "__index");
    if (lua_rawget(L, -2) == LUA_TFUNCTION) { /* methods kept in the metatable itself */
      complete_keys(L, lua_gettop(L) - 1, 3, methods, 1);
      break;
    }
    lua_remove(L, -2);
    lua_remove(L, -2);
  }
  lua_settop(L, 3);
  return 1;
}

/* Readline's generator: hand out the precomputed candidates one by one. */
static char *completion_generator(const char *text, int state)
{
  (void)text;
  if (state == 0) completion_next = 0;
  if (completion_next < ncompletions) return strdup(completions[completion_next++]);
  return NULL;
}

/* Readline's completion entry: complete the word before the cursor as a global, a field
 * (after '.') or a method (after ':'). A single match gets '(' after a function, '.'
 * after a table, a space after a keyword. */
char **felab_complete(const char *text, int start, int end)
{
  static const char *const keywords[] = {
      "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
      "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while"};
  (void)start;
  (void)end;
  rl_attempted_completion_over = 1; /* never fall back to file names */
  completion_reset();
  const char *sep = NULL;
  for (const char *p = text; *p; p++)
    if (*p == '.' || *p == ':') sep = p;
  size_t plen = sep ? (size_t)(sep - text) : 0; /* the expression before the separator */
  const char *partial = sep ? sep + 1 : text;
  size_t partial_len = strlen(partial);
  char last_kind = '\0';
  for (size_t i = 0; i < plen; i++)
    if (text[i] == ':') return NULL; /* a method call is never followed by a field here */
  lua_State *L = complete_state;
  if (!L) return NULL;
  int top = lua_gettop(L);
  lua_pushcfunction(L, complete_collect);
  lua_pushlstring(L, text, plen);
  lua_pushboolean(L, sep && *sep == ':');
  if (lua_checkstack(L, 8) && lua_pcall(L, 2, 1, 0) == LUA_OK && lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      const char *name = lua_tostring(L, -2), *type = lua_tostring(L, -1);
      if (name && type && !strncmp(name, partial, partial_len)) {
        completion_add(text, sep ? plen + 1 : 0, name);
        last_kind = !strcmp(type, "function") ? '(' : !strcmp(type, "table") ? '.' : '\0';
      }
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
  if (!sep)
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++)
      if (!strncmp(keywords[i], partial, partial_len)) {
        completion_add("", 0, keywords[i]);
        last_kind = ' ';
      }
  rl_completion_append_character = ncompletions == 1 ? last_kind : '\0';
  if (ncompletions == 0) return NULL;
  return rl_completion_matches(text, completion_generator);
}

void felab_complete_state(lua_State *L) { complete_state = L; }

void felab_complete_free(void)
{
  completion_reset();
  free(completions);
  completions = NULL;
  completion_cap = 0;
}
#else
typedef int felab_no_completion; /* built without readline: nothing to complete */
#endif
