/* felab meshes from files: the load options and their checks, the Gmsh SDK's calls (the
 * library opened at the first file, one quiet session per file, its arrays copied out), and
 * without the SDK the .msh 4.1 files through felab's own reader (fe_msh_read). Both hand the
 * arrays to fe_mesh_from_arrays (gmsh-io.c). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/error.h"
#include "engine/mesh/mesh.h"
#include "engine/mesh/io/msh.h"
#include "engine/mesh/io/gmsh-io-private.h"
#include "engine/core/progress.h"

#ifdef FE_HAVE_GMSH
#include <dlfcn.h>
#include <gmshc.h>
#include <omp.h>
#endif

void fe_load_opts_default(fe_load_opts *o)
{
  o->size = 0;
  o->order = 1;
  o->algorithm = NULL;
}

/* Gmsh 3D algorithm numbers by name. */
static int gmsh_algorithm(const char *src, const char *name, int *number)
{
  static const struct { const char *name; int number; } algos[] = {
      {"delaunay", 1}, {"initial", 3}, {"frontal", 4}, {"mmg3d", 7}, {"rtree", 9}, {"hxt", 10}};
  for (size_t i = 0; i < sizeof algos / sizeof *algos; i++)
    if (!strcmp(name, algos[i].name)) {
      *number = algos[i].number;
      return 0;
    }
  FE_ERROR(FE_ERR_ARG,
           "%s: unknown mesh algorithm '%s' (delaunay frontal hxt mmg3d rtree initial)", src,
           name);
}

/* The options (defaults when o is NULL) into *out, checked, and path a non-empty regular file
 * that can be opened: what both ways of loading check first. */
static int load_check(const char *path, const fe_load_opts *opts, fe_load_opts *out)
{
  fe_load_opts o;
  fe_load_opts_default(&o);
  if (opts) o = *opts;
  FE_ASSERT(o.order == 1 || o.order == 2, FE_ERR_ARG, "%s: order = %d: felab loads order 1 or 2",
            path, o.order);
  FE_ASSERT(isfinite(o.size) && o.size >= 0, FE_ERR_ARG,
            "%s: size = %g: the mesh size must be a positive number (0: the file's own)", path,
            o.size);
  if (o.algorithm) {
    int number;
    FE_CHECK(gmsh_algorithm(path, o.algorithm, &number));
  }
  struct stat st;
  if (stat(path, &st) != 0)
    FE_ERROR(FE_ERR_IO, "%s: cannot open mesh file: %s", path, strerror(errno));
  FE_ASSERT(S_ISREG(st.st_mode), FE_ERR_IO, "%s: not a regular file", path);
  FE_ASSERT(st.st_size > 0, FE_ERR_IO, "%s: empty file", path);
  FILE *f = fopen(path, "rb");
  if (!f) FE_ERROR(FE_ERR_IO, "%s: cannot open mesh file: %s", path, strerror(errno));
  fclose(f);
  *out = o;
  return 0;
}

#ifdef FE_HAVE_GMSH
/* ----- the SDK calls ----- */

/* The SDK is loaded at the first file it reads, not when felab starts: its library pulls in
 * about 80 others (OpenCASCADE, image and GL libraries) whose symbols the dynamic loader
 * would otherwise resolve at every start, most of felab's start-up time (FE_GMSH_LIB: its
 * soname, from the build). */
#ifndef FE_GMSH_LIB
#define FE_GMSH_LIB "libgmsh.so"
#endif
static struct {
  __typeof__(gmshInitialize) *Initialize;
  __typeof__(gmshFinalize) *Finalize;
  __typeof__(gmshFree) *Free;
  __typeof__(gmshLoggerGet) *LoggerGet;
  __typeof__(gmshLoggerGetLastError) *LoggerGetLastError;
  __typeof__(gmshLoggerStart) *LoggerStart;
  __typeof__(gmshLoggerStop) *LoggerStop;
  __typeof__(gmshModelGetDimension) *ModelGetDimension;
  __typeof__(gmshModelGetEntities) *ModelGetEntities;
  __typeof__(gmshModelGetEntitiesForPhysicalGroup) *ModelGetEntitiesForPhysicalGroup;
  __typeof__(gmshModelGetPhysicalGroups) *ModelGetPhysicalGroups;
  __typeof__(gmshModelGetPhysicalName) *ModelGetPhysicalName;
  __typeof__(gmshModelMeshGenerate) *ModelMeshGenerate;
  __typeof__(gmshModelMeshGetElements) *ModelMeshGetElements;
  __typeof__(gmshModelMeshGetNodes) *ModelMeshGetNodes;
  __typeof__(gmshModelMeshSetOrder) *ModelMeshSetOrder;
  __typeof__(gmshOpen) *Open;
  __typeof__(gmshOptionSetNumber) *OptionSetNumber;
  void (*lexer_flush)(void); /* an internal C++ symbol (see gmsh_stop); may be absent */
} gmsh;

static int gmsh_load(const char *src)
{
  static void *lib;
  if (lib) return 0;
  void *h = dlopen(FE_GMSH_LIB, RTLD_NOW | RTLD_LOCAL);
  FE_ASSERT(h, FE_ERR_IO, "%s: cannot load the Gmsh SDK (%s): %s", src, FE_GMSH_LIB, dlerror());
  const struct {
    const char *name;
    void **fn;
  } fns[] = {
      {"gmshInitialize", (void **)&gmsh.Initialize},
      {"gmshFinalize", (void **)&gmsh.Finalize},
      {"gmshFree", (void **)&gmsh.Free},
      {"gmshLoggerGet", (void **)&gmsh.LoggerGet},
      {"gmshLoggerGetLastError", (void **)&gmsh.LoggerGetLastError},
      {"gmshLoggerStart", (void **)&gmsh.LoggerStart},
      {"gmshLoggerStop", (void **)&gmsh.LoggerStop},
      {"gmshModelGetDimension", (void **)&gmsh.ModelGetDimension},
      {"gmshModelGetEntities", (void **)&gmsh.ModelGetEntities},
      {"gmshModelGetEntitiesForPhysicalGroup", (void **)&gmsh.ModelGetEntitiesForPhysicalGroup},
      {"gmshModelGetPhysicalGroups", (void **)&gmsh.ModelGetPhysicalGroups},
      {"gmshModelGetPhysicalName", (void **)&gmsh.ModelGetPhysicalName},
      {"gmshModelMeshGenerate", (void **)&gmsh.ModelMeshGenerate},
      {"gmshModelMeshGetElements", (void **)&gmsh.ModelMeshGetElements},
      {"gmshModelMeshGetNodes", (void **)&gmsh.ModelMeshGetNodes},
      {"gmshModelMeshSetOrder", (void **)&gmsh.ModelMeshSetOrder},
      {"gmshOpen", (void **)&gmsh.Open},
      {"gmshOptionSetNumber", (void **)&gmsh.OptionSetNumber}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    *fns[i].fn = dlsym(h, fns[i].name);
    if (!*fns[i].fn) {
      dlclose(h);
      FE_ERROR(FE_ERR_IO, "%s: the Gmsh SDK (%s) has no %s", src, FE_GMSH_LIB, fns[i].name);
    }
  }
  *(void **)&gmsh.lexer_flush = dlsym(h, "_Z12gmsh_yyflushv");
  lib = h;
  return 0;
}

/* Gmsh is one global, non-reentrant session, started for each file and finalized after it:
 * after a syntax error its parser reads nothing more until it is restarted. */
static int gmsh_busy;
/* Starting, Gmsh sets OpenMP's thread count to its General.NumThreads (1): felab's loops and
 * kernels ran on one thread after every load. The count is put back when it stops. */
static int gmsh_threads;

/* Start the session quietly (no config files, nothing on the terminal, errors as codes). */
static int gmsh_start(const char *src)
{
  int ierr = 0;
  FE_ASSERT(!gmsh_busy, FE_ERR_ARG, "%s: the Gmsh SDK is already reading a file", src);
  FE_CHECK(gmsh_load(src));
  gmsh_threads = omp_get_max_threads();
  gmsh.Initialize(0, NULL, 0, &ierr);
  if (ierr) omp_set_num_threads(gmsh_threads);
  FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK failed to start", src);
  gmsh.OptionSetNumber("General.Terminal", 0, &ierr);
  gmsh.OptionSetNumber("General.Verbosity", 2, &ierr); /* errors and warnings */
  gmsh.LoggerStart(&ierr);
  gmsh_busy = 1;
  return 0;
}

/* Gmsh 4.8 leaves the rest of a file its .geo parser gave up on in the lexer's buffer, where
 * the next file's parse starts (and fails): flush it (gmsh.lexer_flush, when the SDK has it). */
static void gmsh_stop(void)
{
  int ierr = 0;
  if (gmsh.lexer_flush) gmsh.lexer_flush();
  gmsh.LoggerStop(&ierr);
  gmsh.Finalize(&ierr);
  omp_set_num_threads(gmsh_threads);
  gmsh_busy = 0;
}

/* The first error the SDK logged (or its last error), else what. Frees the log. */
static void gmsh_error_text(char *buf, size_t n, const char *what)
{
  char **log = NULL;
  size_t nlog = 0;
  int ierr = 0;
  snprintf(buf, n, "%s", what);
  gmsh.LoggerGet(&log, &nlog, &ierr);
  int found = 0;
  for (size_t i = 0; i < nlog; i++) {
    if (!found && log[i] && !strncmp(log[i], "Error", 5)) {
      const char *t = log[i] + 5;
      while (*t == ' ' || *t == ':') t++;
      snprintf(buf, n, "%s", t);
      found = 1;
    }
    gmsh.Free(log[i]);
  }
  gmsh.Free(log);
  if (!found) {
    char *last = NULL;
    gmsh.LoggerGetLastError(&last, &ierr);
    if (!ierr && last && *last) snprintf(buf, n, "%s", last);
    gmsh.Free(last);
  }
}

/* Whether the SDK logged an error since the logger started. */
static int gmsh_logged_error(void)
{
  char **log = NULL;
  size_t nlog = 0;
  int ierr = 0, found = 0;
  gmsh.LoggerGet(&log, &nlog, &ierr);
  for (size_t i = 0; i < nlog; i++) {
    found |= log[i] && !strncmp(log[i], "Error", 5);
    gmsh.Free(log[i]);
  }
  gmsh.Free(log);
  return found;
}

/* Everything the SDK hands out, freed in one place. */
typedef struct sdk_arrays {
  size_t *node_tags;
  double *coords, *param;
  size_t nnodes;
  int *dim_tags; /* entities */
  size_t ndim_tags;
  fe_mesh_block *blocks;
  size_t nblocks, cap_blocks;
  void **owned; /* per-entity arrays of the SDK to free */
  size_t nowned, cap_owned;
  int *groups_dt; /* physical groups (dim, tag) */
  size_t ngroups_dt;
  fe_mesh_group *groups;
  char **names;
  int **entities;
} sdk_arrays;

static void sdk_arrays_free(sdk_arrays *s)
{
  gmsh.Free(s->node_tags);
  gmsh.Free(s->coords);
  gmsh.Free(s->param);
  gmsh.Free(s->dim_tags);
  for (size_t i = 0; i < s->nowned; i++) gmsh.Free(s->owned[i]);
  free(s->owned);
  free(s->blocks);
  size_t ng = s->ngroups_dt / 2;
  for (size_t g = 0; s->names && g < ng; g++) gmsh.Free(s->names[g]);
  for (size_t g = 0; s->entities && g < ng; g++) gmsh.Free(s->entities[g]);
  free(s->names);
  free(s->entities);
  free(s->groups);
  gmsh.Free(s->groups_dt);
}

/* Remember an SDK array for sdk_arrays_free (frees it now when out of memory). */
static int own(sdk_arrays *s, void *p)
{
  if (s->nowned == s->cap_owned) {
    size_t cap = s->cap_owned ? 2 * s->cap_owned : 64;
    void **q = realloc(s->owned, cap * sizeof *q);
    if (!q) {
      gmsh.Free(p);
      FE_ERROR(FE_ERR_MEM, "out of memory for the SDK's arrays");
    }
    s->owned = q, s->cap_owned = cap;
  }
  s->owned[s->nowned++] = p;
  return 0;
}

/* Copy the model's nodes, element blocks per entity and physical groups out of the SDK. */
static int sdk_read(const char *src, sdk_arrays *s)
{
  int ierr = 0;
  size_t ncoords = 0, nparam = 0;
  gmsh.ModelMeshGetNodes(&s->node_tags, &s->nnodes, &s->coords, &ncoords, &s->param, &nparam, -1,
                        -1, 0, 0, &ierr);
  FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK could not give the nodes", src);
  FE_ASSERT(ncoords == 3 * s->nnodes, FE_ERR_IO, "%s: %zu coordinates for %zu nodes", src,
            ncoords, s->nnodes);
  gmsh.ModelGetEntities(&s->dim_tags, &s->ndim_tags, -1, &ierr);
  FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK could not list the entities", src);
  for (size_t i = 0; i + 1 < s->ndim_tags; i += 2) {
    int dim = s->dim_tags[i], tag = s->dim_tags[i + 1];
    if (dim < 1) continue;
    int *types = NULL;
    size_t ntypes = 0, **etags = NULL, *etags_n = NULL, etags_nn = 0, **ntags = NULL,
           *ntags_n = NULL, ntags_nn = 0;
    gmsh.ModelMeshGetElements(&types, &ntypes, &etags, &etags_n, &etags_nn, &ntags, &ntags_n,
                             &ntags_nn, dim, tag, &ierr);
    /* own everything first so that any error below frees it */
    int rc = own(s, types);
    if (!rc) rc = own(s, etags);
    if (!rc) rc = own(s, etags_n);
    if (!rc) rc = own(s, ntags);
    if (!rc) rc = own(s, ntags_n);
    for (size_t k = 0; k < etags_nn; k++)
      if (!rc) rc = own(s, etags[k]);
      else gmsh.Free(etags[k]);
    for (size_t k = 0; k < ntags_nn; k++)
      if (!rc) rc = own(s, ntags[k]);
      else gmsh.Free(ntags[k]);
    if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
    FE_ASSERT(!ierr && ntags_nn == ntypes && etags_nn == ntypes, FE_ERR_IO,
              "%s: the Gmsh SDK could not give the elements of entity (%d, %d)", src, dim, tag);
    for (size_t k = 0; k < ntypes; k++) {
      if (s->nblocks == s->cap_blocks) {
        size_t cap = s->cap_blocks ? 2 * s->cap_blocks : 16;
        fe_mesh_block *q = realloc(s->blocks, cap * sizeof *q);
        FE_ASSERT(q, FE_ERR_MEM, "out of memory for the element blocks");
        s->blocks = q, s->cap_blocks = cap;
      }
      fe_mesh_block *b = &s->blocks[s->nblocks++];
      b->gmsh_type = types[k];
      b->entity = tag;
      b->nelements = etags_n[k];
      b->nodes = ntags[k];
      const gmsh_type_info *ti = gmsh_type_lookup(types[k]);
      FE_ASSERT(!ti || ntags_n[k] == etags_n[k] * (size_t)ti->nnodes, FE_ERR_IO,
                "%s: entity (%d, %d): %zu node tags for %zu %s elements", src, dim, tag,
                ntags_n[k], etags_n[k], ti ? ti->name : "?");
    }
  }
  gmsh.ModelGetPhysicalGroups(&s->groups_dt, &s->ngroups_dt, -1, &ierr);
  FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK could not list the physical groups", src);
  size_t ng = s->ngroups_dt / 2;
  s->groups = calloc(ng + 1, sizeof *s->groups);
  s->names = calloc(ng + 1, sizeof *s->names);
  s->entities = calloc(ng + 1, sizeof *s->entities);
  FE_ASSERT(s->groups && s->names && s->entities, FE_ERR_MEM,
            "out of memory for the physical groups");
  for (size_t g = 0; g < ng; g++) {
    fe_mesh_group *gr = &s->groups[g];
    gr->dim = s->groups_dt[2 * g];
    gr->tag = s->groups_dt[2 * g + 1];
    gmsh.ModelGetPhysicalName(gr->dim, gr->tag, &s->names[g], &ierr);
    gr->name = s->names[g];
    gmsh.ModelGetEntitiesForPhysicalGroup(gr->dim, gr->tag, &s->entities[g], &gr->nentities, &ierr);
    gr->entities = s->entities[g];
    FE_ASSERT(!ierr, FE_ERR_IO, "%s: the Gmsh SDK could not give physical group %d", src, gr->tag);
  }
  return 0;
}

/* Open (and mesh, when it holds no mesh) the file in the cleared session. */
static int sdk_open(const char *path, const fe_load_opts *o)
{
  int ierr = 0;
  char why[512];
  gmsh.Open(path, &ierr);
  if (ierr || gmsh_logged_error()) {
    gmsh_error_text(why, sizeof why, "unreadable or unknown format");
    FE_ERROR(FE_ERR_IO, "%s: Gmsh could not read it: %s", path, why);
  }
  int *types = NULL;
  size_t ntypes = 0, **etags = NULL, *etags_n = NULL, etags_nn = 0, **ntags = NULL,
         *ntags_n = NULL, ntags_nn = 0;
  gmsh.ModelMeshGetElements(&types, &ntypes, &etags, &etags_n, &etags_nn, &ntags, &ntags_n,
                           &ntags_nn, -1, -1, &ierr);
  int has_mesh = 0, file_order = 1;
  for (size_t k = 0; k < ntypes; k++) {
    const gmsh_type_info *ti = gmsh_type_lookup(types[k]);
    has_mesh |= ti && ti->dim >= 2 && etags_n[k] > 0;
    if (ti && ti->dim >= 2 && etags_n[k] > 0 && ti->order > file_order) file_order = ti->order;
  }
  for (size_t k = 0; k < etags_nn; k++) gmsh.Free(etags[k]);
  for (size_t k = 0; k < ntags_nn; k++) gmsh.Free(ntags[k]);
  gmsh.Free(types), gmsh.Free(etags), gmsh.Free(etags_n), gmsh.Free(ntags), gmsh.Free(ntags_n);
  if (!has_mesh) {
    int dim = gmsh.ModelGetDimension(&ierr);
    FE_ASSERT(!ierr && dim >= 2, FE_ERR_MESH,
              "%s: neither a 2D/3D mesh nor a geometry to mesh (model dimension %d)", path, dim);
    if (o->size > 0) { /* uniform: the sizes at the file's points would win otherwise */
      gmsh.OptionSetNumber("Mesh.MeshSizeFromPoints", 0, &ierr);
      gmsh.OptionSetNumber("Mesh.MeshSizeMax", o->size, &ierr);
    }
    if (o->algorithm) {
      int number;
      FE_CHECK(gmsh_algorithm(path, o->algorithm, &number));
      gmsh.OptionSetNumber("Mesh.Algorithm3D", number, &ierr);
    }
    char phase[32];
    snprintf(phase, sizeof phase, "meshing %dD", dim);
    fe_progress_phase(phase);
    gmsh.ModelMeshGenerate(dim, &ierr); /* Ctrl-C waits for it: Gmsh cannot be stopped */
    FE_CHECK_INTERRUPT();
    if (ierr || gmsh_logged_error()) {
      gmsh_error_text(why, sizeof why, "meshing failed");
      FE_ERROR(FE_ERR_MESH, "%s: Gmsh could not mesh it: %s", path, why);
    }
  }
  /* The order asked for is the order felab gets: order 2 elevates a first-order mesh (new
   * nodes on the CAD surfaces when the model has them, else at the straight midpoints), and
   * order 1 makes a second-order file's mesh straight. */
  if (o->order != file_order) {
    fe_progress_phase(o->order == 2 ? "making order-2 elements" : "making order-1 elements");
    gmsh.ModelMeshSetOrder(o->order, &ierr);
    if (ierr || gmsh_logged_error()) {
      gmsh_error_text(why, sizeof why, "could not change the element order");
      FE_ERROR(FE_ERR_MESH, "%s: Gmsh could not make order-%d elements: %s", path, o->order,
               why);
    }
  }
  return 0;
}

int fe_mesh_load(const char *path, const fe_load_opts *opts, fe_mesh **out)
{
  FE_ASSERT(path && out, FE_ERR_ARG, "mesh load: missing path or output");
  *out = NULL;
  fe_load_opts o;
  fe_load_opts_default(&o);
  FE_CHECK(load_check(path, opts, &o));
  FE_CHECK(gmsh_start(path));
  fe_progress_begin("gmsh", 0);
  fe_progress_phase("reading the file");
  fe_progress_watch(1); /* Gmsh reports nothing while it works: the time keeps moving */
  int rc = sdk_open(path, &o);
  sdk_arrays s;
  memset(&s, 0, sizeof s);
  if (!rc) fe_progress_phase("converting to felab's mesh");
  if (!rc) rc = sdk_read(path, &s);
  if (!rc) {
    fe_mesh_arrays a = {path, s.nnodes, s.node_tags, s.coords, s.nblocks, s.blocks,
                        s.ngroups_dt / 2, s.groups};
    rc = fe_mesh_from_arrays(&a, out);
  }
  fe_progress_watch(0);
  fe_progress_end();
  sdk_arrays_free(&s);
  gmsh_stop();
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return 0;
}
#else
/* Whether path ends in suffix, in any case. */
static int has_suffix(const char *path, const char *suffix)
{
  size_t n = strlen(path), k = strlen(suffix);
  return n >= k && !strcasecmp(path + n - k, suffix);
}

/* The highest order of the 2D and 3D elements. */
static int arrays_order(const fe_mesh_arrays *a)
{
  int order = 1;
  for (size_t b = 0; b < a->nblocks; b++) {
    const gmsh_type_info *ti = gmsh_type_lookup(a->blocks[b].gmsh_type);
    if (ti && ti->dim >= 2 && a->blocks[b].nelements && ti->order > order) order = ti->order;
  }
  return order;
}

/* Without the SDK: .msh 4.1 files through felab's own reader; nothing else. */
int fe_mesh_load(const char *path, const fe_load_opts *opts, fe_mesh **out)
{
  FE_ASSERT(path && out, FE_ERR_ARG, "mesh load: missing path or output");
  *out = NULL;
  if (!has_suffix(path, ".msh"))
    FE_ERROR(FE_ERR_UNAVAILABLE,
             "%s: reading or meshing this file needs the Gmsh SDK: this felab was built without "
             "it (install libgmsh-dev and rebuild); it reads .msh 4.1 files by itself",
             path);
  fe_load_opts o;
  fe_load_opts_default(&o);
  FE_CHECK(load_check(path, opts, &o));
  fe_progress_begin("msh", 0);
  fe_progress_phase("reading the file");
  fe_mesh_arrays a;
  int rc = fe_msh_read(path, o.order == 1, &a);
  if (!rc && o.order == 2 && arrays_order(&a) == 1)
    rc = fe_error_set(FE_ERR_UNAVAILABLE, __FILE__, __LINE__, __func__,
                      "%s: order = 2 of a first-order mesh needs the Gmsh SDK, which places the "
                      "new nodes: this felab was built without it (a second-order .msh loads as "
                      "it is)",
                      path);
  if (!rc) {
    fe_progress_phase("converting to felab's mesh");
    rc = fe_mesh_from_arrays(&a, out);
  }
  fe_msh_arrays_free(&a);
  fe_progress_end();
  if (rc) return fe_error_push(rc, __FILE__, __LINE__, __func__);
  return 0;
}
#endif
