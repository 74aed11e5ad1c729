/* The Gmsh SDK's C functions the unit tests call, loaded at the first call as felab loads them
 * (engine/mesh/io/gmsh-load.c, by the soname), not linked: Criterion starts the test binary
 * again for every test, and libgmsh with its ~100 libraries (OpenCASCADE, FLTK, ...) took 0.1 s
 * of each start here (0.2 s sanitized), a third of the unit tests' time. Each function below
 * has gmshc.h's prototype and calls the library's own. */
#if FE_HAVE_GMSH
#include <dlfcn.h>
#include <gmshc.h>
#include <stdio.h>
#include <stdlib.h>

/* The SDK's function `name`; a test cannot go on without it, so a missing one ends the run. */
static void *gmsh_symbol(const char *name)
{
  static void *lib;
  if (!lib && !(lib = dlopen(FE_GMSH_LIB, RTLD_NOW | RTLD_LOCAL))) {
    fprintf(stderr, "unit tests: cannot load the Gmsh SDK (%s): %s\n", FE_GMSH_LIB, dlerror());
    abort();
  }
  void *fn = dlsym(lib, name);
  if (!fn) {
    fprintf(stderr, "unit tests: the Gmsh SDK has no %s\n", name);
    abort();
  }
  return fn;
}

/* name's definition: the library's function of the same type, looked up once, called with args */
#define GMSH_CALL(name)                                                                            \
  static __typeof__(name) *fn;                                                                     \
  if (!fn) *(void **)&fn = gmsh_symbol(#name);
#define GMSH_VOID(name, params, args)                                                              \
  void name params                                                                                 \
  {                                                                                                \
    GMSH_CALL(name)                                                                                \
    fn args;                                                                                       \
  }
#define GMSH_INT(name, params, args)                                                               \
  int name params                                                                                  \
  {                                                                                                \
    GMSH_CALL(name)                                                                                \
    return fn args;                                                                                \
  }

GMSH_VOID(gmshInitialize, (int argc, char **argv, const int readConfigFiles, int *ierr),
          (argc, argv, readConfigFiles, ierr))
GMSH_VOID(gmshFinalize, (int *ierr), (ierr))
GMSH_VOID(gmshFree, (void *p), (p))
GMSH_VOID(gmshOpen, (const char *fileName, int *ierr), (fileName, ierr))
GMSH_VOID(gmshWrite, (const char *fileName, int *ierr), (fileName, ierr))
GMSH_VOID(gmshOptionSetNumber, (const char *name, const double value, int *ierr),
          (name, value, ierr))
GMSH_INT(gmshModelGetDimension, (int *ierr), (ierr))
GMSH_VOID(gmshModelMeshGenerate, (const int dim, int *ierr), (dim, ierr))
GMSH_VOID(gmshModelMeshSetOrder, (const int order, int *ierr), (order, ierr))
GMSH_VOID(gmshModelMeshGetBasisFunctions,
          (const int elementType, double *localCoord, size_t localCoord_n,
           const char *functionSpaceType, int *numComponents, double **basisFunctions,
           size_t *basisFunctions_n, int *numOrientations, int *wantedOrientations,
           size_t wantedOrientations_n, int *ierr),
          (elementType, localCoord, localCoord_n, functionSpaceType, numComponents,
           basisFunctions, basisFunctions_n, numOrientations, wantedOrientations,
           wantedOrientations_n, ierr))
GMSH_VOID(gmshModelMeshGetElementProperties,
          (const int elementType, char **elementName, int *dim, int *order, int *numNodes,
           double **localNodeCoord, size_t *localNodeCoord_n, int *numPrimaryNodes, int *ierr),
          (elementType, elementName, dim, order, numNodes, localNodeCoord, localNodeCoord_n,
           numPrimaryNodes, ierr))
GMSH_INT(gmshModelMeshGetElementType,
         (const char *familyName, const int order, const int serendip, int *ierr),
         (familyName, order, serendip, ierr))
GMSH_VOID(gmshModelMeshGetElementsByType,
          (const int elementType, size_t **elementTags, size_t *elementTags_n, size_t **nodeTags,
           size_t *nodeTags_n, const int tag, const size_t task, const size_t numTasks,
           int *ierr),
          (elementType, elementTags, elementTags_n, nodeTags, nodeTags_n, tag, task, numTasks,
           ierr))
GMSH_VOID(gmshModelMeshGetIntegrationPoints,
          (const int elementType, const char *integrationType, double **localCoord,
           size_t *localCoord_n, double **weights, size_t *weights_n, int *ierr),
          (elementType, integrationType, localCoord, localCoord_n, weights, weights_n, ierr))
GMSH_VOID(gmshModelMeshGetJacobians,
          (const int elementType, double *localCoord, size_t localCoord_n, double **jacobians,
           size_t *jacobians_n, double **determinants, size_t *determinants_n, double **coord,
           size_t *coord_n, const int tag, const size_t task, const size_t numTasks, int *ierr),
          (elementType, localCoord, localCoord_n, jacobians, jacobians_n, determinants,
           determinants_n, coord, coord_n, tag, task, numTasks, ierr))
GMSH_VOID(gmshModelMeshGetNodes,
          (size_t **nodeTags, size_t *nodeTags_n, double **coord, size_t *coord_n,
           double **parametricCoord, size_t *parametricCoord_n, const int dim, const int tag,
           const int includeBoundary, const int returnParametricCoord, int *ierr),
          (nodeTags, nodeTags_n, coord, coord_n, parametricCoord, parametricCoord_n, dim, tag,
           includeBoundary, returnParametricCoord, ierr))
GMSH_VOID(gmshModelMeshSetNode,
          (const size_t nodeTag, double *coord, size_t coord_n, double *parametricCoord,
           size_t parametricCoord_n, int *ierr),
          (nodeTag, coord, coord_n, parametricCoord, parametricCoord_n, ierr))
GMSH_VOID(gmshModelMeshSetTransfiniteAutomatic,
          (int *dimTags, size_t dimTags_n, const double cornerAngle, const int recombine,
           int *ierr),
          (dimTags, dimTags_n, cornerAngle, recombine, ierr))
GMSH_INT(gmshModelOccAddBox,
         (const double x, const double y, const double z, const double dx, const double dy,
          const double dz, const int tag, int *ierr),
         (x, y, z, dx, dy, dz, tag, ierr))
GMSH_INT(gmshModelOccAddRectangle,
         (const double x, const double y, const double z, const double dx, const double dy,
          const int tag, const double roundedRadius, int *ierr),
         (x, y, z, dx, dy, tag, roundedRadius, ierr))
GMSH_INT(gmshModelOccAddSphere,
         (const double xc, const double yc, const double zc, const double radius, const int tag,
          const double angle1, const double angle2, const double angle3, int *ierr),
         (xc, yc, zc, radius, tag, angle1, angle2, angle3, ierr))
GMSH_VOID(gmshModelOccExtrude,
          (int *dimTags, size_t dimTags_n, const double dx, const double dy, const double dz,
           int **outDimTags, size_t *outDimTags_n, int *numElements, size_t numElements_n,
           double *heights, size_t heights_n, const int recombine, int *ierr),
          (dimTags, dimTags_n, dx, dy, dz, outDimTags, outDimTags_n, numElements, numElements_n,
           heights, heights_n, recombine, ierr))
GMSH_VOID(gmshModelOccSynchronize, (int *ierr), (ierr))
#endif
