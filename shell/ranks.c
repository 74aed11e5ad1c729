/* felab under mpirun (`mpirun -np N felab script.lua`, or `mpirun -np N felab` for the
 * prompt): every rank runs the same script or the same chunks; only rank 0 reads the input
 * and prints (the others' standard output goes nowhere unless FELAB_ALL_RANKS=1); an error
 * names its rank. One process alone is today's felab: every function here is a no-op then.
 * The Lua table mpi says where a script runs (mpi.rank, mpi.size). */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/error.h"
#include "engine/parallel/comm.h"
#include "shell/shell.h"

int felab_ranks_start(void)
{
  if (fe_comm_start()) {
    fprintf(stderr, "felab: %s\n", fe_error_message());
    return 1;
  }
  const char *all = getenv("FELAB_ALL_RANKS");
  if (fe_comm_rank() > 0 && !(all && *all && strcmp(all, "0")) &&
      !freopen("/dev/null", "w", stdout)) {
    fprintf(stderr, "felab: rank %d cannot silence its output\n", fe_comm_rank());
    return 1;
  }
  return 0;
}

int felab_ranks_read_line(felab_line_reader read, const char *prompt, char **out)
{
  if (!fe_comm_parallel()) return read(prompt, out);
  int ls = 0;
  char *line = NULL;
  if (fe_comm_rank() == 0) ls = read(prompt, &line);
  /* a failed broadcast leaves the ranks apart: stop them all */
  if (fe_comm_bcast(&ls, sizeof ls, 0) || fe_comm_bcast_string(&line, 0)) {
    fprintf(stderr, "felab: rank %d: %s\n", fe_comm_rank(), fe_error_message());
    fe_comm_abort(1);
  }
  *out = line;
  return ls;
}

int felab_ranks_report(const char *msg)
{
  if (!fe_comm_parallel()) return msg != NULL;
  const int size = fe_comm_size();
  char **all = calloc((size_t)size, sizeof(char *));
  if (!all || fe_comm_gather_strings(msg, all, 0)) {
    fprintf(stderr, "felab: rank %d: cannot gather the ranks' errors\n", fe_comm_rank());
    fe_comm_abort(1);
  }
  int failed = msg != NULL;
  fe_comm_max_int(&failed, 1);
  if (fe_comm_rank() == 0) {
    fflush(stdout);
    for (int r = 0; r < size; r++) { /* each message once, with the ranks that gave it */
      if (!all[r]) continue;
      fprintf(stderr, "rank %d", r);
      int n = 0;
      for (int q = r + 1; q < size; q++)
        if (all[q] && !strcmp(all[q], all[r])) {
          fprintf(stderr, n++ ? ", %d" : " (and %d", q);
          free(all[q]);
          all[q] = NULL;
        }
      fprintf(stderr, "%s: %s\n", n ? ")" : "", all[r]);
    }
    fflush(stderr);
  }
  for (int r = 0; r < size; r++) free(all[r]);
  free(all);
  return failed;
}

void felab_ranks_fail(const char *msg)
{
  if (!fe_comm_parallel()) return;
  fflush(stdout);
  fprintf(stderr, "rank %d of %d: %s\n", fe_comm_rank(), fe_comm_size(), msg ? msg : "an error");
  fflush(stderr);
  fe_comm_abort(1);
}

void felab_open_ranks(lua_State *L)
{
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, fe_comm_rank());
  lua_setfield(L, -2, "rank");
  lua_pushinteger(L, fe_comm_size());
  lua_setfield(L, -2, "size");
  lua_setglobal(L, "mpi");
  felab_help_add("mpi", "mpi.rank, mpi.size",
                 "Where this script runs: `mpirun -np N felab script.lua` runs it on every\n"
                 "rank (0 .. N - 1), `mpirun -np N felab` runs each chunk typed at rank 0's\n"
                 "prompt on every rank. Only rank 0 prints (FELAB_ALL_RANKS=1: every rank);\n"
                 "an error says its rank, and at the prompt the session goes on. One process\n"
                 "alone is rank 0 of 1. A space made under mpirun is split over the ranks\n"
                 "(each holds its part of the cells and their nodes: m:partition(N) shows the\n"
                 "parts), and its operators' actions and solves run on every rank together;\n"
                 "each rank still makes or reads the whole mesh (docs/parallel.md).\n"
                 "example: if mpi.rank == 0 then print(mpi.size .. \" ranks\") end");
}
