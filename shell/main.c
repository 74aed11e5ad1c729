/* felab: the program. A Lua 5.4 prompt with felab's modules loaded, a script runner, and
 * the command-line options.
 *
 * The read-eval-print loop follows lua.c: a line is first compiled as `return <line>` so
 * that an expression prints its values; otherwise it is a statement, and a syntax error
 * that ends at <eof> means "incomplete": read another line and try again. A Lua error
 * prints "file:line: message" and returns to the prompt; the session keeps its variables.
 * When standard input is not a terminal the same loop runs without prompts or banner, so a
 * piped session prints exactly what the typed one would.
 *
 * Ctrl-C has two meanings, told apart by `running_chunk`:
 *  - while a chunk runs, the SIGINT handler sets fe_interrupt_flag (engine loops check it
 *    between batches and fail with "interrupted") and a Lua hook that raises "interrupted"
 *    at the next Lua instruction, call or return, so pure-Lua loops stop too. The handler
 *    stays installed: pressing Ctrl-C again never kills the program.
 *  - while a line is read, it only sets `prompt_interrupted`. Readline is driven through
 *    its callback interface from a pselect() loop that unblocks SIGINT only while waiting,
 *    so the line is discarded and a fresh prompt shown outside the signal handler, never by
 *    jumping out of readline. Without readline, getline() fails with EINTR (the handler is
 *    installed without SA_RESTART while reading) and the line is dropped the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/types.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#ifdef FE_HAVE_READLINE
#include <readline/history.h>
#include <readline/readline.h>
#endif

#include "backends/backend.h"
#include "engine/core/error.h"
#include "engine/core/progress.h"
#include "engine/parallel/comm.h"
#include "shell/shell.h"

#define PROMPT "felab> "
#define PROMPT2 "   >> "
#define HISTORY_MAX 1000
#define EOFMARK "<eof>" /* a syntax error ending with this means the chunk is incomplete */

typedef enum { LINE_OK, LINE_EOF, LINE_INTERRUPTED } line_status;

static lua_State *main_state;                     /* for the SIGINT handler and completion */
static volatile sig_atomic_t running_chunk;      /* 1 while user code runs (docall) */
static volatile sig_atomic_t prompt_interrupted; /* Ctrl-C arrived while a line was read */
static volatile sig_atomic_t interrupts_in_call; /* Ctrl-C presses during the current call */
static int interactive;    /* stdin is a terminal: banner and prompts */
static int want_traceback; /* FELAB_TRACEBACK=1: errors carry a Lua traceback */
static int progress_erased; /* the last call drew a progress line (erased when it ended) */

/* ---------------------------------------------------------------------------------------
 * Signals
 * ------------------------------------------------------------------------------------- */

/* The Lua hook set by the SIGINT handler: at the next event in a Lua function, remove
 * itself and raise "file:line: interrupted" there. Events in C functions are let pass: one
 * of them is the error message handler, and an error raised inside it would replace the
 * error on its way (an engine call's own "interrupted", with its position). */
static void interrupt_hook(lua_State *L, lua_Debug *ar)
{
  if (lua_getinfo(L, "S", ar) && ar->what[0] == 'C') return;
  lua_sethook(L, NULL, 0, 0);
  luaL_where(L, 0);
  lua_pushliteral(L, "interrupted");
  lua_concat(L, 2);
  lua_error(L);
}

/* SIGINT: during a call, ask the engine and the Lua code to stop; at the prompt, only note
 * it so the reading loop drops the current line. Async-signal-safe: flags, lua_sethook
 * (designed for this, as in lua.c) and write(). */
static void on_sigint(int sig)
{
  (void)sig;
  if (!running_chunk) {
    prompt_interrupted = 1;
    return;
  }
  fe_interrupt_flag = 1;
  if (main_state)
    lua_sethook(main_state, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  if (++interrupts_in_call == 3) { /* a C call that does not check the flag: say so */
    static const char note[] =
        "\nfelab: still busy in a call that has not reached an interrupt check; "
        "Ctrl-\\ quits\n";
    ssize_t w = write(STDERR_FILENO, note, sizeof note - 1);
    (void)w;
  }
}

/* Install on_sigint. While a chunk runs system calls restart (output is not cut short);
 * while a line is read they do not, so a blocking read returns EINTR. */
static void sigint_install(int restart)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigaction(SIGINT, &sa, NULL);
}

#ifdef FE_HAVE_READLINE
static volatile sig_atomic_t window_resized; /* SIGWINCH while reading a line */

/* SIGWINCH: readline learns the new size in the reading loop. */
static void on_sigwinch(int sig)
{
  (void)sig;
  window_resized = 1;
}
#endif

/* ---------------------------------------------------------------------------------------
 * Running chunks
 * ------------------------------------------------------------------------------------- */

/* Message handler of every call: make the error object a string, with a traceback when
 * FELAB_TRACEBACK=1. Leaves the message on the stack. */
static int msghandler(lua_State *L)
{
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) { /* not a string or number: try __tostring */
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  if (want_traceback) luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Call the function below narg arguments with Ctrl-C armed; like lua_pcall, leaves nres
 * results or the error message. Resets the interrupt state before and after. */
static int docall(lua_State *L, int narg, int nres)
{
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  fe_interrupt_flag = 0;
  interrupts_in_call = 0;
  lua_sethook(L, NULL, 0, 0); /* a hook left over from a late Ctrl-C */
  sigint_install(1);
  running_chunk = 1;
  int status = lua_pcall(L, narg, nres, base);
  running_chunk = 0; /* from here on the handler no longer touches the hook */
  progress_erased = fe_progress_reset(); /* an error or Ctrl-C may have left the line */
  sigint_install(0);
  lua_sethook(L, NULL, 0, 0);
  lua_remove(L, base);
  return status;
}

/* Print the error message on top of the stack (if status is an error) to stderr, after
 * flushing stdout so piped output keeps its order; pop it. Returns status. */
static int report(lua_State *L, int status)
{
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (msg == NULL) msg = "(error object is not a string)";
    fflush(stdout);
    if (interactive && interrupts_in_call > 0 && interrupts_in_call < 3 && !progress_erased)
      fputc('\n', stderr); /* after the terminal's "^C" (an erased line took it along) */
    felab_ranks_fail(msg); /* a script's error on one of several ranks stops them all */
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    lua_pop(L, 1);
  }
  return status;
}

/* Print every value above base, separated by tabs, with felab's show (shell/lib/show.lua:
 * __tostring is used, so a mesh prints its summary, and a plain table is written out with
 * sorted keys), or the global print if show is missing. */
static int print_results(lua_State *L, int base)
{
  int n = lua_gettop(L) - base;
  if (n <= 0) return LUA_OK;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  if (lua_getfield(L, LUA_REGISTRYINDEX, "felab.show") != LUA_TFUNCTION) {
    lua_pop(L, 1);
    lua_getglobal(L, "print");
  }
  lua_insert(L, base + 1);
  int status = docall(L, n, 0);
  if (status != LUA_OK) {
    lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1));
    lua_remove(L, -2);
  }
  return status;
}

/* Run a string (an -e option) as chunk "=(command line)". */
static int dostring(lua_State *L, const char *code)
{
  int status = luaL_loadbuffer(L, code, strlen(code), "=(command line)");
  if (status == LUA_OK) status = docall(L, 0, 0);
  return report(L, status);
}

/* Run the script argv[script] (NULL name: stdin) with arg[1..n] as its `...`. */
static int doscript(lua_State *L, const char *fname)
{
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    lua_getglobal(L, "arg");
    int n = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (int i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1); /* the arg table */
    status = docall(L, n, 0);
  }
  return report(L, status);
}

/* ---------------------------------------------------------------------------------------
 * Reading lines: readline at a terminal, getline otherwise
 * ------------------------------------------------------------------------------------- */

#ifdef FE_HAVE_READLINE
static char history_path[4096]; /* "" when history is not kept */
static char *line_result;         /* the line readline handed over (NULL at EOF) */
static int line_done;             /* the callback ran */

/* Readline's line callback: keep the line and stop reading. */
static void on_line(char *line)
{
  line_result = line;
  line_done = 1;
  rl_callback_handler_remove();
}

/* Read one line with readline's callback interface. SIGINT is blocked except inside
 * pselect, so a Ctrl-C is always seen here, between characters, never inside readline. */
static line_status read_line_readline(const char *prompt, char **out)
{
  sigset_t intmask, waitmask;
  sigemptyset(&intmask);
  sigaddset(&intmask, SIGINT);
  sigprocmask(SIG_BLOCK, &intmask, &waitmask);
  sigdelset(&waitmask, SIGINT);
  prompt_interrupted = 0;
  line_done = 0;
  line_result = NULL;
  rl_callback_handler_install(prompt, on_line);
  line_status st = LINE_OK;
  int fd = fileno(rl_instream ? rl_instream : stdin);
  while (!line_done) {
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(fd, &fds);
    int ready = pselect(fd + 1, &fds, NULL, NULL, NULL, &waitmask);
    if (prompt_interrupted) { /* drop the line, leave a fresh prompt */
      prompt_interrupted = 0;
      rl_replace_line("", 0);
      rl_free_line_state();
      rl_callback_sigcleanup();
      rl_callback_handler_remove();
      fputs("^C\n", stdout);
      fflush(stdout);
      st = LINE_INTERRUPTED;
      break;
    }
    if (ready < 0) {
      if (errno == EINTR) {
        if (window_resized) {
          window_resized = 0;
          rl_resize_terminal();
        }
        continue;
      }
      rl_callback_handler_remove();
      break; /* unreadable input: treat as end of input */
    }
    rl_callback_read_char();
  }
  sigprocmask(SIG_UNBLOCK, &intmask, NULL);
  if (st != LINE_OK) return st;
  if (line_result == NULL) return LINE_EOF;
  *out = line_result;
  return LINE_OK;
}

/* Remember a typed line (not empty, not a repeat of the last) in memory and in the file. */
static void history_add(const char *line)
{
  if (!interactive || line[strspn(line, " \t")] == '\0') return;
  HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  if (last && last->line && !strcmp(last->line, line)) return;
  add_history(line);
  if (history_path[0]) append_history(1, history_path);
}

/* Load ~/.felab_history (or $FELAB_HISTORY), creating it, capped at HISTORY_MAX lines. */
static void history_start(void)
{
  const char *path = getenv("FELAB_HISTORY"), *home = getenv("HOME");
  if (path && *path) snprintf(history_path, sizeof history_path, "%s", path);
  else if (home && *home) snprintf(history_path, sizeof history_path, "%s/.felab_history", home);
  else return;
  stifle_history(HISTORY_MAX);
  int fd = open(history_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) { /* unwritable: keep history in memory only */
    history_path[0] = '\0';
    return;
  }
  close(fd);
  history_truncate_file(history_path, HISTORY_MAX);
  read_history(history_path);
}

/* Set readline up: our completion, word breaks that keep "a.b:c" together, signals left
 * to felab, history loaded. */
static void readline_start(void)
{
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigwinch;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGWINCH, &sa, NULL);
  rl_readline_name = "felab";
  rl_catch_signals = 0;
  rl_catch_sigwinch = 0;
  felab_complete_state(main_state);
  rl_attempted_completion_function = felab_complete;
  rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{}()[],+-*/%^~#";
  rl_completer_word_break_characters = rl_basic_word_break_characters;
  history_start();
}

/* Undo readline_start: cap the history file, free the candidates. */
static void readline_stop(void)
{
  if (history_path[0]) history_truncate_file(history_path, HISTORY_MAX);
  felab_complete_free();
}
#else
/* Without readline there is no history. */
static void history_add(const char *line) { (void)line; }
#endif

/* Read one line with getline (prompt only at a terminal). Ctrl-C while waiting makes
 * getline fail with EINTR: the partial line is dropped. */
static line_status read_line_plain(const char *prompt, char **out)
{
  char *buf = NULL;
  size_t cap = 0;
  prompt_interrupted = 0;
  if (interactive) {
    fputs(prompt, stdout);
    fflush(stdout);
  }
  for (;;) {
    errno = 0;
    ssize_t n = getline(&buf, &cap, stdin);
    if (n >= 0) {
      while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
      *out = buf;
      return LINE_OK;
    }
    if (prompt_interrupted) {
      prompt_interrupted = 0;
      clearerr(stdin);
      free(buf);
      if (interactive) {
        fputc('\n', stdout);
        fflush(stdout);
      }
      return LINE_INTERRUPTED;
    }
    if (ferror(stdin) && errno == EINTR) { /* another signal: keep waiting */
      clearerr(stdin);
      continue;
    }
    free(buf);
    return LINE_EOF;
  }
}

/* Read one line of this process's input into *out (malloc'd, no newline). */
static int read_line_here(const char *prompt, char **out)
{
  fflush(stdout);
#ifdef FE_HAVE_READLINE
  if (interactive) return read_line_readline(prompt, out);
#endif
  return read_line_plain(prompt, out);
}

/* Read one line: here, or under mpirun rank 0's, handed to every rank. */
static line_status read_line(const char *prompt, char **out)
{
  return (line_status)felab_ranks_read_line(read_line_here, prompt, out);
}

/* ---------------------------------------------------------------------------------------
 * The prompt
 * ------------------------------------------------------------------------------------- */

/* Whether a load status and message (on top) mean "the chunk is not finished yet". */
static int incomplete(lua_State *L, int status)
{
  if (status != LUA_ERRSYNTAX) return 0;
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  size_t marklen = sizeof(EOFMARK) - 1;
  return msg && len >= marklen && !strcmp(msg + len - marklen, EOFMARK);
}

/* Read and compile one chunk: first as "return <line>", else as a statement that may span
 * several lines. On LINE_OK, *status is the load status and the function (or the error
 * message) is on the stack. */
static line_status load_chunk(lua_State *L, int *status)
{
  char *line;
  line_status ls = read_line(PROMPT, &line);
  if (ls != LINE_OK) return ls;
  history_add(line);
  const char *ret = lua_pushfstring(L, "return %s", line);
  *status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
  if (*status == LUA_OK) { /* an expression */
    lua_remove(L, -2);
    free(line);
    return LINE_OK;
  }
  lua_pop(L, 2);
  size_t len = strlen(line);
  for (;;) {
    *status = luaL_loadbuffer(L, line, len, "=stdin");
    if (!incomplete(L, *status)) break;
    char *more;
    ls = read_line(PROMPT2, &more);
    if (ls == LINE_EOF) break; /* report the incomplete chunk's error */
    lua_pop(L, 1);
    if (ls == LINE_INTERRUPTED) {
      free(line);
      return LINE_INTERRUPTED;
    }
    history_add(more);
    size_t mlen = strlen(more);
    char *joined = realloc(line, len + mlen + 2);
    if (!joined) {
      free(more);
      free(line);
      lua_pushliteral(L, "not enough memory for the input line");
      *status = LUA_ERRMEM;
      return LINE_OK;
    }
    line = joined;
    line[len++] = '\n'; /* the lines of one chunk, as typed */
    memcpy(line + len, more, mlen + 1);
    len += mlen;
    free(more);
  }
  free(line);
  return LINE_OK;
}

/* The read-eval-print loop, until end of input. Returns the exit status: 0, or 1 when a
 * piped (non-terminal) session had errors. */
static int repl(lua_State *L)
{
  int base = lua_gettop(L), errors = 0;
  if (interactive) {
    printf("felab %s (%s): help() for an overview, Ctrl-D to quit\n", FELAB_VERSION,
           LUA_RELEASE);
    fflush(stdout);
  }
  for (;;) {
    lua_settop(L, base);
    int status;
    line_status ls = load_chunk(L, &status);
    if (ls == LINE_EOF) break;
    if (ls == LINE_INTERRUPTED) continue;
    if (status == LUA_OK) status = docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) status = print_results(L, base);
    if (fe_comm_parallel()) { /* every rank's error reaches rank 0, with its rank */
      const char *msg = status == LUA_OK ? NULL : lua_tostring(L, -1);
      if (felab_ranks_report(status == LUA_OK ? NULL : msg ? msg : "(error object is not a "
                                                                  "string)")) errors++;
    } else if (report(L, status) != LUA_OK) errors++;
  }
  lua_settop(L, base);
  if (interactive) fputc('\n', stdout);
  fflush(stdout);
  return !interactive && errors ? 1 : 0;
}

/* ---------------------------------------------------------------------------------------
 * Command line
 * ------------------------------------------------------------------------------------- */

/* What the command line asked for (parsed before the Lua state exists). */
typedef struct options {
  int argc;
  char **argv;
  int script;      /* index of the script in argv, 0 if none */
  int stay;        /* -i: the prompt after the script and -e code */
  int has_e;       /* at least one -e */
  int prompt;      /* the prompt runs: -i, or neither a script nor -e */
} options;

/* Print the usage to f. */
static void print_usage(FILE *f)
{
  fprintf(f,
          "usage: felab [options] [script.lua [args...]]\n"
          "With no script, felab reads Lua at a prompt (piped input runs line by line, "
          "without prompts).\n"
          "options:\n"
          "  -e CODE             run CODE (may be repeated)\n"
          "  -i                  stay at the prompt after the script and -e code\n"
          "  -                   run standard input as a script\n"
          "  --                  stop handling options\n"
          "  --backend NAME      default backend:");
  for (int i = 0; i < fe_backend_count(); i++) fprintf(f, " %s", fe_backend_name(i));
  fprintf(f,
          "\n"
          "  --precision P       default precision: double or single\n"
          "  -v, --version       the version and the optional features built in\n"
          "  -h, --help          this message\n"
          "environment:\n"
          "  FELAB_BACKEND       default backend (--backend wins)\n"
          "  FELAB_TRACEBACK=1   errors carry a Lua and an engine traceback\n"
          "  FELAB_HISTORY       the prompt's history file (default ~/.felab_history)\n"
          "  FELAB_PROGRESS=0    no live line for calls over FELAB_PROGRESS_AFTER (2) seconds\n"
          "  FELAB_ALL_RANKS=1   under mpirun every rank prints (else rank 0 alone)\n"
          "  FELAB_EXCHANGE_IPC=0, FELAB_EXCHANGE_PHASES=0|1   a split space's exchange through\n"
          "                      the host; after the cells | beside them (docs/parallel.md)\n"
          "  FELAB_NODE_SUMS=0   a split space's CG sums over the ranks through the host, not on\n"
          "                      the devices of one machine (docs/parallel.md)\n"
          "A script sees its arguments in the table arg (arg[0] is the script) and in `...`.\n"
          "Exit status: 0; 1 after an error in a script, in -e code or in piped input; 2 for a\n"
          "bad command line.\n");
}

/* Print the version, Lua's, and which optional features were built. */
static void print_version(void)
{
#ifdef FE_HAVE_READLINE
  const char *readline = "yes";
#else
  const char *readline = "no";
#endif
#ifdef FE_HAVE_OPENCL
  const char *opencl = "yes";
#else
  const char *opencl = "no";
#endif
#ifdef FE_HAVE_GMSH
  const char *gmsh = "yes";
#else
  const char *gmsh = "no";
#endif
  printf("felab %s\n%s\nbuilt with: readline %s, OpenCL %s, Gmsh %s\n", FELAB_VERSION,
         LUA_RELEASE, readline, opencl, gmsh);
}

/* Complain about the command line and exit 2. */
static void bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void bad_usage(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "felab: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  print_usage(stderr);
  exit(2);
}

/* The value of option argv[*i] ("--backend NAME" or "--backend=NAME"); advances *i. */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
  size_t n = strlen(name);
  if (argv[*i][n] == '=') return argv[*i] + n + 1;
  if (*i + 1 >= argc) bad_usage("option '%s' needs an argument", name);
  return argv[++*i];
}

/* Parse the options that come before the script; apply --backend and --precision. Exits
 * for --help, --version and a bad command line. */
static void parse_options(int argc, char **argv, options *o)
{
  memset(o, 0, sizeof *o);
  o->argc = argc;
  o->argv = argv;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || !strcmp(a, "-")) { /* the script ("-" is stdin) */
      o->script = i;
      return;
    }
    if (!strcmp(a, "--")) {
      o->script = i + 1 < argc ? i + 1 : 0;
      return;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      print_usage(stdout);
      exit(0);
    } else if (!strcmp(a, "-v") || !strcmp(a, "--version")) {
      print_version();
      exit(0);
    } else if (!strcmp(a, "-i")) {
      o->stay = 1;
    } else if (!strncmp(a, "-e", 2)) {
      if (a[2] == '\0' && ++i >= argc) bad_usage("option '%s' needs an argument", "-e");
      o->has_e = 1;
    } else if (!strcmp(a, "--backend") || !strncmp(a, "--backend=", 10)) {
      const char *name = option_value(argc, argv, &i, "--backend");
      if (fe_backend_set_default(name)) {
        fprintf(stderr, "felab: %s\n", fe_error_message());
        exit(2);
      }
    } else if (!strcmp(a, "--precision") || !strncmp(a, "--precision=", 12)) {
      fe_precision p;
      if (fe_precision_parse(option_value(argc, argv, &i, "--precision"), &p)) {
        fprintf(stderr, "felab: %s\n", fe_error_message());
        exit(2);
      }
      fe_precision_set_default(p);
    } else {
      bad_usage("unrecognized option '%s'", a);
    }
  }
}

/* Parse the command line; decide whether the prompt runs. */
static void parse_command_line(int argc, char **argv, options *o)
{
  parse_options(argc, argv, o);
  o->prompt = o->stay || (!o->script && !o->has_e);
}

/* Make the global arg table as lua.c does: arg[0] the script, arg[1..] its arguments,
 * negative indices the interpreter and its options. */
static void create_arg_table(lua_State *L, const options *o)
{
  int script = o->script ? o->script : 0;
  int narg = o->argc - (script + 1);
  lua_createtable(L, narg > 0 ? narg : 0, script + 1);
  for (int i = 0; i < o->argc; i++) {
    lua_pushstring(L, o->argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* Run the -e options in order; stop at the first failure. Returns 1 on success. */
static int run_e_options(lua_State *L, const options *o)
{
  int end = o->script ? o->script : o->argc;
  for (int i = 1; i < end; i++) {
    const char *a = o->argv[i];
    if (!strcmp(a, "--")) break;
    if (!strcmp(a, "--backend") || !strcmp(a, "--precision")) {
      i++; /* skip the value */
      continue;
    }
    if (strncmp(a, "-e", 2) != 0) continue;
    const char *code = a[2] ? a + 2 : o->argv[++i];
    if (dostring(L, code) != LUA_OK) return 0;
  }
  return 1;
}

/* Everything that touches Lua, protected (like lua.c's pmain): open the libraries and
 * felab's modules, make arg, run -e code and the script, then the prompt if wanted.
 * Pushes the exit status. */
static int pmain(lua_State *L)
{
  const options *o = lua_touserdata(L, 1);
  lua_settop(L, 0);
  luaL_checkversion(L);
  luaL_openlibs(L);
  felab_open_all(L);
  felab_open_progress(L, interactive && isatty(STDERR_FILENO));
  create_arg_table(L, o);
  felab_open_ranks(L);
  int ok = run_e_options(L, o);
  if (ok && o->script) {
    const char *fname = o->argv[o->script];
    if (!strcmp(fname, "-") && strcmp(o->argv[o->script - 1], "--") != 0) fname = NULL;
    ok = doscript(L, fname) == LUA_OK;
  }
  int status = ok ? 0 : 1;
  if (o->prompt) status = repl(L);
  lua_pushinteger(L, status);
  return 1;
}

/* felab: parse the options, make the Lua state, run, clean up. */
int main(int argc, char **argv)
{
  options o;
  if (argc == 2 && !strcmp(argv[1], "--cuda-trial")) return fe_cuda_trial_serve(); /* felab's own */
  parse_command_line(argc, argv, &o);
  if (felab_ranks_start()) return 1; /* MPI under mpirun */
  const char *tb = getenv("FELAB_TRACEBACK");
  want_traceback = tb && *tb && strcmp(tb, "0") != 0;
  interactive = isatty(STDIN_FILENO);
  setvbuf(stdout, NULL, _IOLBF, 0); /* stdout and stderr interleave in pipes and files */

  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "felab: cannot create the Lua state: not enough memory\n");
    return 1;
  }
  main_state = L;
  sigint_install(0);
#ifdef FE_HAVE_READLINE
  if (interactive && o.prompt) readline_start();
#endif
  lua_pushcfunction(L, pmain);
  lua_pushlightuserdata(L, &o);
  int status;
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) { /* an error outside any user chunk */
    report(L, LUA_ERRRUN);
    status = 1;
  } else {
    status = (int)lua_tointeger(L, -1);
  }
#ifdef FE_HAVE_READLINE
  if (interactive && o.prompt) readline_stop();
#endif
  running_chunk = 0;
  main_state = NULL; /* the handler must not touch a closed state */
  lua_close(L);
  fe_backend_shutdown();
  fflush(stdout);
  return status;
}
