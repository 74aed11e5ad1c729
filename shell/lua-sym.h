/* felab shell: symbolic values for traced physics (shell/lua-sym.c).
 * A symbol is a scalar, vector or matrix of nodes of the expression graph of the trace in
 * progress; arithmetic, math.* and the physics helpers on symbols build the graph. */
#ifndef FELAB_LUA_SYM_H
#define FELAB_LUA_SYM_H

#include <lua.h>

#include "engine/physics/expr.h"

#define FELAB_SYM "felab.symbol"

/* Register the symbol type, put the helpers (dot, inner, outer, transpose, sym, tr, det,
 * identity, norm, grad, select, lt, le, gt, ge, eq, ne) into the table at index t, and make
 * math.* accept symbols (adding math.tanh and math.pow). */
void felab_sym_open(lua_State *L, int t);

/* Start a trace on graph g (dimension dim); symbols made outside it are refused. */
void felab_trace_begin(fe_xgraph *g, int dim);
void felab_trace_end(void);

/* Push a symbol whose entries are variables of kind v, indices base, base + 1, ...:
 * a scalar (rows = 0), a vector (cols = 0) or a rows x cols matrix. */
void felab_sym_push_var(lua_State *L, fe_var v, int base, int rows, int cols);
/* Push a constant scalar symbol. */
void felab_sym_push_node(lua_State *L, int node);

/* The value at i (a symbol, a number, nil = 0, or a table of them) as n = rows x cols
 * (rows = 0: scalar; cols = 0: vector) node ids; an error naming `what` and both shapes
 * when it does not fit. */
void felab_sym_roots(lua_State *L, int i, int rows, int cols, int *ids, const char *what);

#endif
