/* felab strategy "sumfact": counts of its kernel template (engine/codegen/kernels/sumfact.knl), phase
 * by phase, from the template's loops. A multiply-add counts 2, a lone add, multiply or
 * divide 1, an add into y 1; the tables a work group copies once are not counted per cell.
 * The shared sizes mirror the template's SF_* macros. */
#include "engine/operator/strategies/sumfact-count.h"

#include <math.h>

/* The template's sizes (its SF_* macros) for one shape. */
typedef struct sf_sizes {
  int zp, zq;     /* node and point layers along z (1 on quads) */
  int nb, nq;     /* nodes and points of a cell */
  int nvu, ng, nv; /* interpolated fields: the state, with the direction, with the coordinates */
  int nf0, nfl;   /* per point: f0's fluxes; the shared fluxes (S0 if any, x, y) */
  int interp_z;   /* contractions along z in registers (hexes, not collocated) */
} sf_sizes;

static int max2(int a, int b) { return a > b ? a : b; }

static sf_sizes sizes_of(const fe_sumfact_shape *s)
{
  sf_sizes z;
  z.zp = s->dim == 3 ? s->p1 : 1;
  z.zq = s->dim == 3 ? s->q1 : 1;
  z.nb = s->p1 * s->p1 * z.zp;
  z.nq = s->q1 * s->q1 * z.zq;
  z.nvu = s->need_u ? s->nc : 0;
  z.ng = z.nvu + (s->jacobian && !s->diagonal ? s->nc : 0);
  z.nv = z.ng + (s->need_x && !s->x_corners ? s->dim : 0);
  z.nf0 = s->has_f0 ? s->nc : 0;
  z.nfl = (s->dim == 3 || s->has_f0 ? s->nc : 0) + 2 * s->nc;
  z.interp_z = s->dim == 3 && !s->collocated;
  return z;
}

/* sf_geometry once: on hexes J from the column's J0, J1 (6 entries linear in z), then
 * sf_invert; stored: reads. */
static double geometry_flops(const fe_sumfact_shape *s)
{
  if (!s->vertices) return 0;
  return s->dim == 2 ? 8 : 18 + 42;
}

/* ... at every point, or (affine cells) at the first of each column's: per point and per
 * column. */
static double point_geometry_flops(const fe_sumfact_shape *s)
{
  return s->affine ? 0 : geometry_flops(s);
}

static double column_geometry_flops(const fe_sumfact_shape *s)
{
  return s->affine ? geometry_flops(s) : 0;
}

/* sf_column_geometry, once per column of points: per coordinate, two 2-term sums for each
 * of J0 and J1 along x and y on hexes (a 4-term nested sum for z), two on quads. */
static double column_flops(const fe_sumfact_shape *s)
{
  if (!s->vertices) return 0;
  return s->dim == 2 ? 2 * 2 * 3 : 3 * (4 * 3 + 7);
}

/* Once per cell: the half edge vectors (a difference and a halving per coordinate). */
static double edge_flops(const fe_sumfact_shape *s)
{
  return s->vertices ? 2.0 * s->dim * (s->dim << (s->dim - 1)) : 0;
}

/* The gather's z contraction of nv fields (hexes, not collocated). */
static double gather_z_flops(const fe_sumfact_shape *s, const sf_sizes *z)
{
  double p = s->p1;
  return z->interp_z ? 2.0 * z->nv * p * p * s->q1 * p : 0;
}

/* The gather's z contraction and the interpolations in x and y of nv fields. */
static double interpolation_flops(const fe_sumfact_shape *s, const sf_sizes *z)
{
  double p = s->p1, q = s->q1, f = 0;
  if (s->collocated) return 0;
  f += gather_z_flops(s, z);
  f += 2.0 * z->nv * z->zq * q * p * p; /* x: items (qx, j), P1 terms per layer */
  f += 2.0 * z->nv * z->zq * q * q * p; /* y: items (qx, qy) */
  return f;
}

/* sf_point_values: the collocated derivative along each direction and Jinv^T per field. */
static double values_flops(const fe_sumfact_shape *s, const sf_sizes *z)
{
  return z->ng * (2.0 * s->dim * s->q1 + (s->folded ? 0 : 2.0 * s->dim * s->dim));
}

/* Residual and Jacobian action. */
/* x at a point from its column's (sf_column_x): on hexes DIM pairs of terms (an FMA and a
 * multiply), on quads a copy. */
static double corner_x_flops(const fe_sumfact_shape *s)
{
  return s->need_x && s->x_corners && s->dim == 3 ? 3.0 * s->dim : 0;
}

/* sf_column_x, once a column: each corner's bilinear factor and its DIM terms. */
static double column_x_flops(const fe_sumfact_shape *s)
{
  return s->need_x && s->x_corners ? (double)(1 << s->dim) * (1 + 2.0 * s->dim) : 0;
}

static double action_flops(const fe_sumfact_shape *s, const sf_sizes *z)
{
  double p = s->p1, q = s->q1, nc = s->nc, d = s->dim;
  double point = s->folded ? values_flops(s, z) + s->qd_flops /* the words contracted */
                 : point_geometry_flops(s) + (s->need_f ? s->field_flops : 0) +
                   corner_x_flops(s) + values_flops(s, z) + s->phys_flops + d /* W detJ */ + z->nf0 +
                   nc * d * (2 * d + 1) /* fluxes */;
  double f = edge_flops(s) + interpolation_flops(s, z) + z->nq * point +
             q * q * (column_flops(s) + column_geometry_flops(s) + column_x_flops(s));
  /* transposed derivatives, and along z in registers */
  f += nc * z->nq * (2.0 * d * q + (z->interp_z ? 2.0 * p : 0));
  if (!s->collocated) {
    f += 2.0 * nc * z->zp * p * q * q; /* transposed y */
    f += 2.0 * nc * z->zp * p * p * q; /* transposed x */
  }
  return f + nc * z->nb; /* scatter */
}

/* The diagonal: interpolation once, then per component the quadrature phase (geometry, the
 * state, 1 + DIM linearizations, the pairs, the z pass on hexes) and the y and x passes. */
static double diagonal_flops(const fe_sumfact_shape *s, const sf_sizes *z)
{
  double p = s->p1, q = s->q1, d = s->dim;
  double pairs = (1 + d) * (s->phys_flops + (s->has_f0 ? 1 : 0) + d * (2 * d + 1)) + d * (d + 1) / 2;
  double point = point_geometry_flops(s) + (s->need_f ? s->field_flops : 0) +
                 corner_x_flops(s) + values_flops(s, z) + d + pairs + (s->dim == 3 ? 20.0 * p : 0);
  double round = z->nq * point +
                 q * q * (column_flops(s) + column_geometry_flops(s) + column_x_flops(s)) +
                 12.0 * q * p * z->zp * q /* y pass */ +
                 6.0 * p * p * z->zp * q /* x pass */ + z->nb /* scatter */;
  return edge_flops(s) + interpolation_flops(s, z) + s->nc * round;
}

double fe_sumfact_vec_flops_per_cell(const fe_sumfact_shape *s)
{
  sf_sizes z = sizes_of(s);
  if (s->diagonal) return 0; /* its rounds: counted scalar (an estimate) */
  /* every phase over the cells (SF_CELLS) is SIMD on the cpu, the gather's z contraction
   * too (after the values are gathered into the cells' lanes), but the edge vectors and the
   * adds into y */
  return action_flops(s, &z) - edge_flops(s) - s->nc * z.nb;
}

double fe_sumfact_contraction_flops_per_cell(const fe_sumfact_shape *s)
{
  sf_sizes z = sizes_of(s);
  if (s->diagonal) return 0; /* its rounds: not counted apart (an estimate) */
  double p = s->p1, q = s->q1, nc = s->nc, d = s->dim;
  double f = interpolation_flops(s, &z) + z.nq * z.ng * 2.0 * d * q; /* in, derivatives */
  f += nc * z.nq * (2.0 * d * q + (z.interp_z ? 2.0 * p : 0));    /* transposed derivatives */
  if (!s->collocated) f += 2.0 * nc * z.zp * p * q * (q + p);      /* transposed y and x */
  return f;
}

double fe_sumfact_walk_flops_per_cell(const fe_sumfact_shape *s)
{
  sf_sizes z = sizes_of(s);
  if (s->diagonal) return 0;
  /* along x and y (both directions on quads): 2 q multiply-adds a direction, field and point */
  return (z.ng + s->nc) * (double)z.nq * 2.0 * 2.0 * s->q1;
}

double fe_sumfact_contraction_words(const fe_sumfact_shape *s)
{
  sf_sizes z = sizes_of(s);
  return 2.0 * max2(max2(z.nv, s->nc), 1) * max2(z.nb, z.nq);
}

double fe_sumfact_nonfma_per_cell(const fe_sumfact_shape *s)
{
  sf_sizes z = sizes_of(s);
  /* the reciprocal determinant: at each point, or once a column (q1^2 of them) */
  double geo = !s->vertices ? 0 : s->affine ? (double)s->q1 * s->q1 : z.nq;
  if (s->diagonal) return s->nc * (z.nq * (1 + s->dim) * s->phys_nonfma + geo);
  return s->folded ? 0 : z.nq * s->phys_nonfma + geo;
}

double fe_sumfact_flops_per_cell(const fe_sumfact_shape *s)
{
  sf_sizes z = sizes_of(s);
  return s->diagonal ? diagonal_flops(s, &z) : action_flops(s, &z);
}

size_t fe_sumfact_shared_bytes(const fe_sumfact_shape *s, int block, int real_size)
{
  sf_sizes z = sizes_of(s);
  int p = s->p1, q = s->q1, nc = s->nc, interp = !s->collocated;
  int sa = z.nv * z.zq * p * p, sb = z.nv * z.zq * p * q, sv = z.nv * z.nq;
  int sf = z.nfl * z.nq, sc = nc * z.zp * q * q, sd = nc * z.zp * p * q, sr = nc * z.nb;
  int sx, sy;
  if (s->diagonal) {
    sx = max2(interp ? sa : 0, sv + 3 * z.zp * p * q);
    sy = max2(interp ? sb : 0, max2(6 * z.zp * q * q, z.nb));
  } else if (s->collocated) {
    sx = max2(sv, sr);
    sy = sf;
  } else {
    sx = max2(max2(sa, sv), max2(sc, sr));
    sy = max2(max2(sb, sf), sd);
  }
  int se = s->vertices ? s->dim * (s->dim << (s->dim - 1)) : 0;
  int xc = s->need_x && s->x_corners;
  se += xc ? s->dim << s->dim : 0; /* the corners (SF_SXC) */
  int tables = 2 * q * p + q * q + q + (s->vertices || xc ? 2 * q : 0) + (s->diagonal ? 3 * q * p : 0);
  return ((size_t)tables + (size_t)(sx + sy + se) * (size_t)block) * (size_t)real_size;
}

int fe_sumfact_group_items(const fe_sumfact_shape *s, int block)
{
  int n = max2(s->p1, s->q1);
  int items = block * n * n; /* the widest plane of a cell: (x, y), walking z */
  return (items + 31) / 32 * 32;
}

/* The wavefront bytes per item of one access in a phase of n items a cell, groups of block
 * cells: block n items in warps of 32, a warp's words of `size` bytes in 128-byte wavefronts
 * (size 0: a table read, one wavefront a warp); per item, 128 times that over block n. */
static double item_bytes(double n, int block, int size)
{
  if (block <= 0) return size > 0 ? size : 4; /* full warps */
  const long long items = (long long)(n * block), full = items / 32, rest = items % 32;
  if (items <= 0) return 0;
  double wf = size > 0 ? full * ceil(32.0 * size / 128) + ceil(rest * (double)size / 128)
                       : (double)(full + (rest > 0));
  return 128 * wf / (double)items;
}

/* The loads of one row of a 1D table that every item of a warp reads alike (`words` words
 * of `size` bytes, rows `stride` words apart from word `offset` of the tables): nvcc loads
 * it 16 bytes at a time where the rows stay so aligned, else 8, each load one wavefront
 * (Nsight Compute at Q7 hexes in single: LDS.128). */
static double row_loads(int words, int stride, int offset, int size)
{
  int v = 1;
  if ((stride * size) % 16 == 0 && (offset * size) % 16 == 0) v = 16 / size;
  else if ((stride * size) % 8 == 0 && (offset * size) % 8 == 0) v = 8 / size;
  return ceil((double)words / v);
}

/* The quadrature phase of the residual and the Jacobian action, per column of points. The
 * rows DQ[qx][.] and DQ[qy][.] of the x and y derivatives are the same at every point of the
 * column: read once (nvcc keeps them in registers); the z derivative's row DQ[qz][.], the
 * same for every item, once a point for the fields and the accumulators (Nsight Compute at
 * Q7 hexes: the phase's wavefronts 0.54 (single) and 0.65 (double) of a count that read
 * every table word at every point). */
static double column_shared(const fe_sumfact_shape *s, const sf_sizes *z, double d, double t,
                            int size)
{
  double q = s->q1, nc = s->nc, dim = s->dim;
  int zreg = s->dim == 3;
  double col = s->folded ? 0 : 2 * t; /* the column's 1D weights (folded: in the words) */
  if (s->vertices) col += 4 * t + (s->dim == 3 ? 36 : 8) * d; /* linear factors, edges */
  if (zreg) col += z->ng * q * d;                            /* the column's values */
  if (z->ng > 0) col += 2 * q * t;                           /* DQ[qx][.], DQ[qy][.] */
  double point = (s->dim == 3 ? (s->vertices ? 2 : 0) + 1 : 0) * t; /* z factors, weight */
  point += z->ng * (q * 2 * d + d);                   /* values along x and y, the value */
  if (zreg) point += row_loads(s->q1, s->q1, 2 * s->q1 * s->p1, size) * t; /* DQ[qz][.] */
  if (s->need_x && s->x_corners) col += (1 << s->dim) * dim * d + 4 * t; /* corners, L */
  if (s->need_x && s->x_corners && s->dim == 3) point += 2 * t;          /* L(., qz) */
  else if (s->need_x && !s->x_corners) point += dim * d;
  point += nc * 2 * d;                                /* FX, FY */
  if (!zreg && s->has_f0) point += nc * d;            /* S0 */
  return col + z->zq * point + (zreg ? nc * q * d : 0);
}

double fe_sumfact_shared_per_cell(const fe_sumfact_shape *s, int real_size, int block)
{
  return fe_sumfact_shared_phases(s, real_size, block, NULL);
}

double fe_sumfact_shared_phases(const fe_sumfact_shape *s, int real_size, int block,
                                double part[3])
{
  sf_sizes z = sizes_of(s);
  double p = s->p1, q = s->q1, nc = s->nc, n, d, t, b = 0, gather;
  int interp = !s->collocated;
  /* each phase: n items a cell (the template's SF_CELLS and FE_INNER loops), d the bytes of an
   * item's word, t of its table read */
#define SF_PHASE(items) \
  (n = (items), d = item_bytes(n, block, real_size), t = item_bytes(n, block, 0))
  if (s->vertices) { /* the edges */
    SF_PHASE(s->dim << (s->dim - 1));
    b += n * s->dim * d;
  }
  if (z.nv > 0) { /* the gather's stores, and B1 along z */
    SF_PHASE(p * p);
    b += n * z.nv * (z.interp_z ? q * (d + p * t) : z.zp * d);
  }
  gather = b;
  if (z.nv > 0 && interp) {
    SF_PHASE(z.nv * z.zq * p * q);
    b += n * (p * (t + d) + d); /* x */
    SF_PHASE(z.nv * z.zq * q * q);
    b += n * (p * (t + d) + d); /* y */
  }
  /* the quadrature phase (the diagonal's own rounds are counted as the action's: an
   * estimate) */
  SF_PHASE(q * q);
  b += n * column_shared(s, &z, d, t, real_size);
  /* transposed x and y derivatives per column (the columns DQ[.][qx], DQ[.][qy] read once),
   * and z back in registers (the row B1[qz][.], the same for every item, once a point) */
  double ns0 = s->dim == 3 || s->has_f0;
  double zrow = z.interp_z ? row_loads(s->p1, s->p1, 0, real_size) * t : d;
  b += n * (2 * q * t + nc * (z.zq * ((ns0 ? d : 0) + q * 2 * d + zrow) + (z.interp_z ? p * d : 0)));
  if (interp) {
    SF_PHASE(nc * z.zp * p * q);
    b += n * (q * (t + d) + d); /* transposed y */
    SF_PHASE(nc * z.nb);
    b += n * (q * (t + d) + d); /* transposed x */
  }
  SF_PHASE(z.nb);
  if (part) part[0] = gather, part[1] = b - gather, part[2] = n * nc * d;
  b += n * nc * d; /* the scatter's loads */
#undef SF_PHASE
  return b;
}
