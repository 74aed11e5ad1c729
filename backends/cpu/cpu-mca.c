/* felab cpu backend: a kernel's hot loop as llvm-mca simulates it, for the performance
 * model's cpu cycles (fe_kernel_resources' loop_cycles). The module's source is compiled once
 * more to assembly, the assembly scanned for the kernel's innermost loop with the most
 * floating-point instructions, and that loop run in llvm-mca's model of this processor
 * (FELAB_MCA names llvm-mca's command; "off": none); the answer is kept beside the object. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu-backend.h"
#include "engine/core/error.h"
#include "engine/core/strbuf.h"

/* A floating-point instruction of x86 assembly (AT&T): a multiply-add, a multiply, an add, a
 * subtraction, a division or a square root, scalar or packed. */
static int cpu_fp_instruction(const char *line)
{
  const char *p = line + strspn(line, " \t");
  static const char *ops[] = {"vfmadd", "vfmsub", "vfnmadd", "vfnmsub", "vmul", "vadd",
                              "vsub",   "vdiv",   "vsqrt",   "mul",     "add",  "sub", "div"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    size_t n = strlen(ops[i]);
    if (strncmp(p, ops[i], n)) continue;
    const char *q = p + n; /* the precision's suffix: ss, sd, ps, pd (after an FMA's 132/213/231) */
    q += strspn(q, "0123456789");
    if ((q[0] == 's' || q[0] == 'p') && (q[1] == 's' || q[1] == 'd')) return 1;
  }
  return 0;
}

/* The hot loop of kernel `name` in the assembly text asm (its functions: name's own and the
 * OpenMP regions outlined from it, name._omp_fn.N): of the innermost loops (a backward jump to
 * a label with no other backward jump inside to it or past it: a loop whose head a shorter
 * path also returns to is taken by that path), the one with the most floating-point
 * instructions; its instructions (no labels, no directives) into out. 0 if there is none. */
static int cpu_hot_loop(const char *name, char *asm_text, fe_strbuf *out)
{
  enum { MAXL = 1 << 16 };
  char **line = malloc(sizeof *line * MAXL);
  if (!line) return 0;
  int n = 0, mine = 0;
  size_t len = strlen(name);
  for (char *save = NULL, *t = strtok_r(asm_text, "\n", &save); t && n < MAXL; t = strtok_r(NULL, "\n", &save)) {
    if (t[0] != '.' && t[0] != ' ' && t[0] != '\t' && strchr(t, ':')) /* a function's label */
      mine = !strncmp(t, name, len) && (t[len] == ':' || t[len] == '.');
    if (mine) line[n++] = t;
  }
  int best_a = -1, best_b = -1, best_fp = 0;
  for (int b = 0; b < n; b++) {
    const char *p = line[b] + strspn(line[b], " \t");
    if (p[0] != 'j') continue;
    const char *target = strstr(p, ".L");
    if (!target) continue;
    int a = -1;
    for (int i = b - 1; i >= 0 && a < 0; i--)
      if (!strncmp(line[i], target, strlen(target)) && line[i][strlen(target)] == ':') a = i;
    if (a < 0) continue; /* a forward jump */
    int inner = 0, fp = 0;
    for (int i = a + 1; i < b && !inner; i++) {
      const char *q = line[i] + strspn(line[i], " \t"), *tq = strstr(q, ".L");
      if (q[0] == 'j' && tq) /* a backward jump inside to a label inside, or to this loop's
                              * own head: a loop within, or a shorter way round this one */
        for (int j = a; j < i && !inner; j++)
          inner = !strncmp(line[j], tq, strlen(tq)) && line[j][strlen(tq)] == ':';
      fp += cpu_fp_instruction(line[i]);
    }
    if (!inner && fp > best_fp) best_a = a, best_b = b, best_fp = fp;
  }
  for (int i = best_a + 1; best_fp > 0 && i <= best_b; i++) {
    const char *q = line[i] + strspn(line[i], " \t");
    if (line[i][0] == '.' || q[0] == '.' || q[0] == '#') continue; /* labels, directives */
    fe_strbuf_printf(out, "%s\n", line[i]);
  }
  free(line);
  return best_fp > 0;
}

/* Whether llvm-mca is here (asked once a session; FELAB_MCA=off: never). */
int cpu_mca_available(cpu_impl *c)
{
  if (c->has_mca < 0) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "command -v '%.255s' > /dev/null 2>&1", c->mca);
    c->has_mca = system(cmd) == 0;
  }
  return c->has_mca;
}

/* Keep module m's assembly text (taken over; NULL: none) among the last CPU_ASM_KEPT
 * compiled, dropping the oldest's. */
void cpu_asm_keep(cpu_impl *c, fe_module *m, char *text)
{
  if (!text) return;
  pthread_mutex_lock(&c->asm_lock);
  fe_module *old = c->asm_kept[c->asm_next];
  if (old) {
    free(old->asm_text);
    old->asm_text = NULL;
  }
  m->asm_text = text;
  c->asm_kept[c->asm_next] = m;
  c->asm_next = (c->asm_next + 1) % CPU_ASM_KEPT;
  pthread_mutex_unlock(&c->asm_lock);
}

/* Kernel k's hot loop as llvm-mca simulates it: the module's assembly (the same compiler and
 * flags: the code that runs; kept from its compile in this session, else its source compiled
 * once more), its hot loop cut out and run 100 times in llvm-mca's model of this processor
 * (-mcpu=native); cycles an iteration, kept beside the object as base.name.mca. None where
 * llvm-mca is absent or fails. */
static void cpu_simulate(cpu_impl *c, fe_kernel *k)
{
  k->simulated = 1;
  fe_module *m = k->mod;
  char path[1200], tmp[1120], cmd[4000];
  snprintf(path, sizeof path, "%.1099s.%.63s.mca", m->base, k->name);
  FILE *f = fopen(path, "r");
  if (f) {
    int ok = fscanf(f, "%lf", &k->loop_cycles) == 1 && k->loop_cycles > 0;
    fclose(f);
    if (ok) return;
    k->loop_cycles = 0;
    fe_cache_drop(path, "not a number of cycles"); /* simulated again below */
  }
  if (!cpu_mca_available(c)) return;
  snprintf(tmp, sizeof tmp, "%.1099s.%d", m->base, (int)getpid()); /* per process */
  char s[1200], loop[1200];
  snprintf(s, sizeof s, "%.1119s.s", tmp);
  snprintf(loop, sizeof loop, "%.1119s.loop.s", tmp);
  char *text = NULL;
  pthread_mutex_lock(&c->asm_lock); /* the assembly this session compiled the object from */
  if (m->asm_text) text = strdup(m->asm_text);
  pthread_mutex_unlock(&c->asm_lock);
  snprintf(cmd, sizeof cmd, "%.255s %.255s -S -o '%s' '%.1099s.c' > /dev/null 2>&1", c->cc, c->flags, s,
           m->base);
  if (!text && system(cmd) == 0) text = cpu_take_file(s, LONG_MAX); /* a cached object's */
  remove(s);
  fe_strbuf body = {0};
  char *src = NULL;
  int found = text && cpu_hot_loop(k->name, text, &body);
  free(text);
  if (fe_strbuf_finish(&body, &src) || !found || !(f = fopen(loop, "w"))) {
    free(src);
    return;
  }
  fputs(src, f);
  fclose(f);
  free(src);
  snprintf(cmd, sizeof cmd, "'%.255s' -mcpu=native -iterations=100 -all-views=false -summary-view '%s' 2> /dev/null",
           c->mca, loop);
  FILE *pipe = popen(cmd, "r");
  double iterations = 0, cycles = 0;
  char line[256];
  while (pipe && fgets(line, sizeof line, pipe)) {
    if (!strncmp(line, "Iterations:", 11)) iterations = atof(line + 11);
    if (!strncmp(line, "Total Cycles:", 13)) cycles = atof(line + 13);
  }
  if (pipe) pclose(pipe);
  remove(loop);
  if (!(iterations > 0 && cycles > 0)) return;
  k->loop_cycles = cycles / iterations;
  snprintf(s, sizeof s, "%.1119s.mca", tmp); /* written whole, then in place */
  if ((f = fopen(s, "w"))) {
    fprintf(f, "%.6g\n", k->loop_cycles);
    fclose(f);
    rename(s, path);
  }
}

/* The cpu knows no registers or occupancy; a kernel's hot loop's cycles where llvm-mca is. */
int cpu_kernel_resources(void *impl, fe_kernel *k, fe_kernel_resources *res)
{
  memset(res, 0, sizeof *res);
  if (!k->mod) return 0;
  if (!k->simulated) cpu_simulate(impl, k);
  res->loop_cycles = k->loop_cycles;
  return 0;
}
