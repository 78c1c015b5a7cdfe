// B-spline math, written once for the CPU backend, CUDA and Metal.
// Bases follow Cox–de Boor on a per-feature knot vector g[0..n_knots): half-open intervals,
// zero outside [g[0], g[n_knots-1]), NaN in -> NaN out, the same operation order as efficient-kan.
#pragma once

#include "swisk/kernels/dialect.h"

#define SWISK_MAX_SPLINE_ORDER 7       // the fused KAN kernels (kan.h, kan_mma.h)
#define SWISK_MAX_GPU_SPLINE_ORDER 15  // the expansion kernels on GPUs (register arrays); CPU: 63
#define SWISK_MAX_CPU_SPLINE_ORDER 63
#define SWISK_MAX_SILU_DERIVATIVE 8    // silu^(m) columns (the bases have every order: zero past k)

// Parameters of the expansion kernels (plain data, shared by host, CUDA and Metal). The expanded
// operand of a row is [silu^(m)(x_i) for i < in, when base] then B^(m)_j(x_i) at base*in + i*n_basis + j.
struct BsplineParams {
  sk_u32 rows;     // product of x's leading dimensions
  sk_u32 in;       // features (rows of the grid)
  sk_u32 n_knots;  // knots per feature
  sk_u32 order;    // spline order k
  sk_u32 n_basis;  // n_knots - 1 - order
  sk_u32 deriv;    // derivative order m
  sk_u32 base;     // 1: the silu columns lead each row
  sk_u32 width;    // row length: base*in + in*n_basis
};

// Launch geometry of the untiled bodies: SWISK_STRIDE_THREADS threads per block, grid-stride over every
// (row, feature). The GPUs take the tiled bodies: bspline_expand_grid, bspline_contract_grid.
SWISK_HD SkGrid bspline_basis_grid(SWISK_CONST BsplineParams& p) { return sk_stride_grid(sk_u64(p.rows) * p.in); }

// The register-array bound M (a template parameter of the kernels) for a spline order on GPUs.
SWISK_HD sk_u32 bspline_gpu_bucket(sk_u32 order) { return order <= 3 ? 3 : order <= 7 ? 7 : 15; }

// The order+1 bases that can be non-zero at x: v[r] is B_{span - MAX + r}, r in [MAX - order, MAX].
template <typename A>
struct BsplineLocal {
  A v[SWISK_MAX_SPLINE_ORDER + 1];
  A d[SWISK_MAX_SPLINE_ORDER + 1];  // dB/dx, when asked for
  sk_i32 span;                       // knot interval of x; -1 outside the grid, -2 NaN
};

// True when the knots strictly increase (a NaN knot fails too).
template <typename A, typename P>
SWISK_FN bool bspline_row_ok(P g, sk_i32 n_knots) {
  for (sk_i32 t = 0; t + 1 < n_knots; ++t)
    if (!(A(g[t + 1]) > A(g[t]))) return false;
  return true;
}

// Local Cox–de Boor (a loop, no recursion); g points at one feature's knots, in any address space.
template <typename A, typename P>
SWISK_FN BsplineLocal<A> bspline_local(A x, P g, sk_i32 n_knots, sk_i32 order, bool want_deriv) {
  const sk_i32 M = SWISK_MAX_SPLINE_ORDER;
  BsplineLocal<A> b;
  for (sk_i32 r = 0; r <= M; ++r) {
    b.v[r] = A(0);
    b.d[r] = A(0);
  }
  if (sk_isnan(x)) {
    for (sk_i32 r = 0; r <= M; ++r) {
      b.v[r] = sk_nan(x);
      b.d[r] = sk_nan(x);
    }
    b.span = -2;
    return b;
  }
  if (!(x >= A(g[0]) && x < A(g[n_knots - 1]))) {
    b.span = -1;
    return b;
  }
  sk_i32 lo = 0, hi = n_knots - 1;  // invariant: g[lo] <= x < g[hi]
  while (hi - lo > 1) {
    sk_i32 mid = (lo + hi) / 2;
    if (x >= A(g[mid])) lo = mid;
    else hi = mid;
  }
  const sk_i32 s = lo;
  b.span = s;
  b.v[M] = A(1);
  for (sk_i32 k = 1; k <= M; ++k) {
    if (k > order) break;
    if (want_deriv && k == order) {
      for (sk_i32 r = 0; r <= M; ++r) {
        const sk_i32 j = s - M + r;
        if (r < M - k || j < 0 || j > n_knots - 2 - k) continue;
        const A next = r < M ? b.v[r + 1] : A(0);
        b.d[r] = A(k) * (b.v[r] / (A(g[j + k]) - A(g[j])) - next / (A(g[j + k + 1]) - A(g[j + 1])));
      }
    }
    for (sk_i32 r = 0; r <= M; ++r) {
      if (r < M - k) continue;
      const sk_i32 j = s - M + r;
      A nv = A(0);
      if (j >= 0 && j <= n_knots - 2 - k) {
        const A gj = A(g[j]), gj1 = A(g[j + 1]), gjk = A(g[j + k]), gjk1 = A(g[j + k + 1]);
        const A left = (x - gj) / (gjk - gj);
        const A right = (gjk1 - x) / (gjk1 - gj1);
        const A next = r < M ? b.v[r + 1] : A(0);
        nv = left * b.v[r] + right * next;
      }
      b.v[r] = nv;
    }
  }
  return b;
}

// Basis value j (0 <= j < n_basis) from the local values, with static indexing only.
template <typename A>
SWISK_FN A bspline_pick(SWISK_THREAD const A* v, sk_i32 span, sk_i32 j) {
  const sk_i32 M = SWISK_MAX_SPLINE_ORDER;
  A out = span == -2 ? v[0] : A(0);  // NaN input: every basis is NaN
  for (sk_i32 r = 0; r <= M; ++r)
    if (span >= 0 && span - M + r == j) out = v[r];
  return out;
}

// ---- expansion with derivatives, order bounded by a compile-time M -----------------------------

// v[r] = B^(deriv)_{span-M+r, order}(x) for r in [M - order, M], else 0; returns span (-1 outside the
// grid, -2 for NaN: every v is NaN). Levels past order - deriv take derivative steps
// k·(B_{j,k-1}/(g[j+k]-g[j]) - B_{j+1,k-1}/(g[j+k+1]-g[j+1])) instead of Cox–de Boor's; zero past order.
template <sk_i32 M, typename A, typename P>
SWISK_FN sk_i32 bspline_local_m(A x, P g, sk_i32 n_knots, sk_i32 order, sk_i32 deriv, SWISK_THREAD A* v) {
  for (sk_i32 r = 0; r <= M; ++r) v[r] = A(0);
  if (sk_isnan(x)) {
    for (sk_i32 r = 0; r <= M; ++r) v[r] = x;
    return -2;
  }
  if (!(x >= A(g[0]) && x < A(g[n_knots - 1]))) return -1;
  sk_i32 lo = 0, hi = n_knots - 1;  // invariant: g[lo] <= x < g[hi]
  while (hi - lo > 1) {
    const sk_i32 mid = (lo + hi) / 2;
    if (x >= A(g[mid])) lo = mid;
    else hi = mid;
  }
  const sk_i32 s = lo;
  if (deriv > order) return s;
  v[M] = A(1);
  for (sk_i32 k = 1; k <= M; ++k) {
    if (k > order) break;
    const bool step = k > order - deriv;
    for (sk_i32 r = 0; r <= M; ++r) {
      if (r < M - k) continue;
      const sk_i32 j = s - M + r;
      A nv = A(0);
      if (j >= 0 && j <= n_knots - 2 - k) {
        const A gj = A(g[j]), gj1 = A(g[j + 1]), gjk = A(g[j + k]), gjk1 = A(g[j + k + 1]);
        const A next = r < M ? v[r + 1] : A(0);
        if (step) nv = A(k) * (v[r] / (gjk - gj) - next / (gjk1 - gj1));
        else nv = (x - gj) / (gjk - gj) * v[r] + (gjk1 - x) / (gjk1 - gj1) * next;
      }
      v[r] = nv;
    }
  }
  return s;
}

// Basis value j from the local values of bspline_local_m (static indexing only).
template <sk_i32 M, typename A>
SWISK_FN A bspline_pick_m(SWISK_THREAD const A* v, sk_i32 span, sk_i32 j) {
  A out = span == -2 ? v[0] : A(0);
  for (sk_i32 r = 0; r <= M; ++r)
    if (span >= 0 && span - M + r == j) out = v[r];
  return out;
}

// silu^(m)(x) = x·σ^(m)(x) + m·σ^(m-1)(x); σ^(j) = P_j(σ) with P_0(s) = s, P_{j+1} = P_j'(s)·s(1 - s)
// (orders 1 and 2 in closed form with 1 - σ(x) taken as σ(-x)).
template <typename A>
SWISK_FN A sk_silu_deriv(A x, sk_i32 m) {
  const A sp = A(1) / (A(1) + sk_exp(-x)), sm = A(1) / (A(1) + sk_exp(x));
  if (m == 0) return x * sp;
  if (m == 1) return sp * (A(1) + x * sm);
  if (m == 2) return sp * sm * (A(2) + x * (sm - sp));
  const sk_i32 D = SWISK_MAX_SILU_DERIVATIVE + 2;
  A c[D], prev = A(0), cur = A(0);  // coefficients of P_j, by powers of s
  for (sk_i32 i = 0; i < D; ++i) c[i] = i == 1 ? A(1) : A(0);
  for (sk_i32 j = 0; j <= SWISK_MAX_SILU_DERIVATIVE; ++j) {
    if (j > m) break;
    A val = A(0);
    for (sk_i32 i = D - 1; i >= 0; --i) val = val * sp + c[i];
    prev = cur;
    cur = val;
    for (sk_i32 i = D - 1; i >= 1; --i) c[i] = A(i) * c[i] - A(i - 1) * c[i - 1];
    c[0] = A(0);
  }
  return x * cur + A(m) * prev;
}

// ---- kernel bodies (one thread per (row, feature), grid-stride) ---------------------------------

// Element e = (row n, feature i) of an expansion: silu's column written to out (when p.base), and the
// local bases for bspline_element_basis.
template <sk_i32 M, typename A>
struct BsplineElement {
  A v[M + 1];
  sk_i32 span;
  bool ok;  // the feature's knot row is valid (else its bases are NaN)
};
// The local bases of xv on feature i's knot row.
template <sk_i32 M, typename A, typename T>
SWISK_FN BsplineElement<M, A> bspline_local_element(SWISK_CONST BsplineParams& p, SWISK_GLOBAL const T* grid,
                                                    sk_u64 i, A xv) {
  SWISK_GLOBAL const T* g = grid + i * p.n_knots;
  BsplineElement<M, A> l;
  l.span = bspline_local_m<M>(xv, g, sk_i32(p.n_knots), sk_i32(p.order), sk_i32(p.deriv), l.v);
  l.ok = bspline_row_ok<A>(g, sk_i32(p.n_knots));
  return l;
}
template <sk_i32 M, typename T>
SWISK_FN BsplineElement<M, typename sk_acc<T>::type> bspline_expand_element(
    SWISK_CONST BsplineParams& p, SWISK_GLOBAL const T* x, SWISK_GLOBAL const T* grid, SWISK_GLOBAL T* out,
    sk_u64 e) {
  typedef typename sk_acc<T>::type A;
  const sk_u64 n = e / p.in, i = e % p.in;
  const A xv = A(x[e]);
  if (p.base) out[n * p.width + i] = T(sk_silu_deriv(xv, sk_i32(p.deriv)));
  return bspline_local_element<M>(p, grid, i, xv);
}
// Basis j of the element (NaN for a bad knot row).
template <sk_i32 M, typename A>
SWISK_FN A bspline_element_basis(SWISK_THREAD const BsplineElement<M, A>& l, sk_i32 j) {
  const A b = bspline_pick_m<M>(l.v, l.span, j);
  return l.ok ? b : sk_nan(b);
}

// out[n, :] = the expanded operand of row n (layout: BsplineParams). A bad knot row gives NaN bases.
template <sk_i32 M, typename T>
SWISK_FN void bspline_expand_body(SkIdx id, SWISK_CONST BsplineParams& p, SWISK_GLOBAL const T* x,
                                  SWISK_GLOBAL const T* grid, SWISK_GLOBAL T* out) {
  const sk_u64 total = sk_u64(p.rows) * p.in;
  const sk_u64 step = sk_u64(id.bdx) * id.gdx;
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < total; e += step) {
    const BsplineElement<M, typename sk_acc<T>::type> l = bspline_expand_element<M, T>(p, x, grid, out, e);
    SWISK_GLOBAL T* o = out + (e / p.in) * p.width + p.base * p.in + (e % p.in) * p.n_basis;
    for (sk_i32 j = 0; j < sk_i32(p.n_basis); ++j) o[j] = T(bspline_element_basis<M>(l, j));
  }
}

// The GPUs' tiled bodies: a block takes a tile of F features (a power of two, <= 32, fewer for fewer
// features) by R rows (2^lr, F·R = 512 but for the shared memory),
// x's tile (and grad's) read coalesced into shared memory, one thread per element with consecutive
// threads on consecutive rows of one feature: a warp's knot loads then hit one or two features' knots
// (one cache line each) instead of 32 features', which made the expansion L1-bound. The expansion
// writes each element's n_basis values to stage (rows of F·n_basis + 1 floats: odd for an even
// F·n_basis, so the lanes hit different banks) and the block stores the tile's rows of F·n_basis
// consecutive columns coalesced.
// xs (R rows of F + 1) holds x, then each element's silu column (expand) or its gx (contract). Tiles
// whose smallest form (one feature, one row) does not fit take the untiled bodies.
#define SWISK_BSPLINE_STAGE 6144  // floats of shared memory (24 KiB)
struct BsplineTile {
  sk_u32 f, lf, lr;  // features (2^lf), log2 rows
  sk_u32 pitch;      // stage's row: f·n_basis + 1
};
// extra: arrays of R·(F + 1) besides stage (expand 1, contract 2).
SWISK_HD sk_u64 bspline_tile_floats(sk_u32 nb, sk_u32 f, sk_u32 lr, sk_u32 extra) {
  return (sk_u64(f) * nb + 1 + sk_u64(extra) * (f + 1)) << lr;
}
SWISK_HD BsplineTile bspline_tile(sk_u32 nb, sk_u32 in, sk_u32 extra) {
  BsplineTile t;
  t.lf = 0;
  while (t.lf < 5 && (1u << t.lf) < in) ++t.lf;
  t.lr = 9 - t.lf;  // 512 elements: two per thread
  while (t.lr > 0 && bspline_tile_floats(nb, 1u << t.lf, t.lr, extra) > SWISK_BSPLINE_STAGE) --t.lr;
  while (t.lf > 0 && bspline_tile_floats(nb, 1u << t.lf, t.lr, extra) > SWISK_BSPLINE_STAGE) --t.lf;
  t.f = 1u << t.lf;
  t.pitch = t.f * nb + 1;
  return t;
}
SWISK_HD bool bspline_tiled(SWISK_CONST BsplineParams& p, sk_u32 extra) {
  return bspline_tile_floats(p.n_basis, 1, 0, extra) <= SWISK_BSPLINE_STAGE;
}
SWISK_HD sk_u64 bspline_tiles(SWISK_CONST BsplineParams& p, sk_u32 extra) {
  const BsplineTile t = bspline_tile(p.n_basis, p.in, extra);
  return sk_tiles(p.rows, 1u << t.lr) * sk_tiles(p.in, t.f);
}
// The grid of the expansion (extra = 1) and the contraction (extra = 2): one block per tile (at most
// 4096, looping), or the untiled bodies' grid-stride grid.
SWISK_HD SkGrid bspline_tiled_grid(SWISK_CONST BsplineParams& p, sk_u32 extra) {
  if (!bspline_tiled(p, extra)) return bspline_basis_grid(p);
  const sk_u64 tiles = bspline_tiles(p, extra);
  return sk_tile_grid(tiles > 4096 ? 4096 : tiles, 1);
}
SWISK_HD SkGrid bspline_expand_grid(SWISK_CONST BsplineParams& p) { return bspline_tiled_grid(p, 1); }
SWISK_HD SkGrid bspline_contract_grid(SWISK_CONST BsplineParams& p) { return bspline_tiled_grid(p, 2); }

#if defined(SWISK_BARRIER)
// The tile's origin: rows n0.., features i0.., and how many of each are inside x (rv, fv).
struct BsplineTileAt {
  sk_u64 n0;
  sk_u32 i0, rv, fv;
};
SWISK_FN BsplineTileAt bspline_tile_at(SWISK_CONST BsplineParams& p, BsplineTile t, sk_u64 tile) {
  const sk_u64 tf = sk_tiles(p.in, t.f);
  BsplineTileAt a;
  a.n0 = (tile / tf) << t.lr;
  a.i0 = sk_u32(tile % tf) * t.f;
  a.rv = p.rows - a.n0 < (sk_u64(1) << t.lr) ? sk_u32(p.rows - a.n0) : 1u << t.lr;
  a.fv = p.in - a.i0 < t.f ? p.in - a.i0 : t.f;
  return a;
}
// A block's walk over a tile's rows of `cols` consecutive values: rows one by one, the threads along
// the row, or when a row is shorter than the block, several rows per pass (one value per thread).
struct BsplineRowWalk {
  sk_u32 r, rstep, q, qstep, cols;
};
SWISK_FN BsplineRowWalk bspline_row_walk(SkIdx id, sk_u32 cols) {
  BsplineRowWalk w;
  const sk_u32 per = cols == 0 || cols >= id.bdx ? 1u : id.bdx / cols;  // rows per pass
  w.r = per > 1 ? id.tx / cols : 0u;
  w.q = id.tx - w.r * cols;
  w.rstep = per;
  w.qstep = per > 1 ? cols : id.bdx;
  w.cols = w.r < per ? cols : 0u;  // threads past the pass's rows sit out
  return w;
}

// Element el of a tile: by row (consecutive el along a row: the coalesced loads and stores of x, silu,
// grad's silu columns and gx) or by feature (consecutive el on consecutive rows of one feature: the
// bases); slot: its place in the R rows of F + 1; in: inside x.
struct BsplineTileEl {
  sk_u32 r, f, slot;
  bool in;
};
SWISK_FN BsplineTileEl bspline_tile_el(BsplineTile t, BsplineTileAt a, sk_u32 el, bool by_row) {
  BsplineTileEl e;
  e.r = by_row ? el >> t.lf : el & ((1u << t.lr) - 1u);
  e.f = by_row ? el & (t.f - 1u) : el >> t.lr;
  e.slot = e.r * (t.f + 1) + e.f;
  e.in = e.r < a.rv && e.f < a.fv;
  return e;
}

// xs[r·(F + 1) + f] = x[n0 + r, i0 + f] for the tile's elements inside x, coalesced.
template <typename T, typename A>
SWISK_FN void bspline_load_x(SkIdx id, SWISK_CONST BsplineParams& p, BsplineTile t, BsplineTileAt a,
                             SWISK_GLOBAL const T* x, SWISK_TG A* xs) {
  for (sk_u32 el = id.tx; el < (t.f << t.lr); el += id.bdx) {
    const BsplineTileEl e = bspline_tile_el(t, a, el, true);
    if (e.in) xs[e.slot] = A(x[(a.n0 + e.r) * p.in + a.i0 + e.f]);
  }
}

template <sk_i32 M, typename T>
SWISK_FN void bspline_expand_staged_body(SkIdx id, SWISK_CONST BsplineParams& p, SWISK_GLOBAL const T* x,
                                         SWISK_GLOBAL const T* grid, SWISK_GLOBAL T* out,
                                         SWISK_TG typename sk_acc<T>::type* stage) {
  typedef typename sk_acc<T>::type A;
  if (!bspline_tiled(p, 1)) {
    bspline_expand_body<M, T>(id, p, x, grid, out);
    return;
  }
  const BsplineTile t = bspline_tile(p.n_basis, p.in, 1);
  const sk_u32 nb = p.n_basis;
  SWISK_TG A* xs = stage + (t.pitch << t.lr);
  const sk_u64 tiles = bspline_tiles(p, 1);
  for (sk_u64 tile = id.bx; tile < tiles; tile += id.gdx) {  // the same trip count for the whole block
    const BsplineTileAt a = bspline_tile_at(p, t, tile);
    bspline_load_x(id, p, t, a, x, xs);
    SWISK_BARRIER();
    for (sk_u32 el = id.tx; el < (t.f << t.lr); el += id.bdx) {  // a fill, then the k + 1 non-zero values
      const BsplineTileEl e = bspline_tile_el(t, a, el, false);
      if (!e.in) continue;
      SWISK_TG A* xv = xs + e.slot;
      const BsplineElement<M, A> l = bspline_local_element<M>(p, grid, a.i0 + e.f, *xv);
      SWISK_TG A* s = stage + e.r * t.pitch + e.f * nb;
      const A fill = !l.ok ? sk_nan(A(0)) : l.span == -2 ? l.v[0] : A(0);
      for (sk_u32 j = 0; j < nb; ++j) s[j] = fill;
      if (l.ok && l.span >= 0)
        for (sk_i32 q = 0; q <= M; ++q) {
          const sk_i32 j = l.span - M + q;
          if (j >= 0 && j < sk_i32(nb)) s[j] = l.v[q];
        }
      if (p.base) *xv = sk_silu_deriv(*xv, sk_i32(p.deriv));
    }
    SWISK_BARRIER();
    const BsplineRowWalk w = bspline_row_walk(id, a.fv * nb);  // row r's columns i0·nb .. (i0 + fv)·nb
    for (sk_u32 r = w.r; r < a.rv; r += w.rstep) {
      SWISK_GLOBAL T* o = out + (a.n0 + r) * p.width + sk_u64(p.base) * p.in + sk_u64(a.i0) * nb;
      for (sk_u32 q = w.q; q < w.cols; q += w.qstep) o[q] = T(stage[r * t.pitch + q]);
    }
    if (p.base)
      for (sk_u32 el = id.tx; el < (t.f << t.lr); el += id.bdx) {
        const BsplineTileEl e = bspline_tile_el(t, a, el, true);
        if (e.in) out[(a.n0 + e.r) * p.width + a.i0 + e.f] = T(xs[e.slot]);
      }
    SWISK_BARRIER();
  }
}
#endif

// gx[n, i] = sum over feature i's columns c of grad[n, c] times the expanded operand of derivative
// order deriv at x[n, i] (the backward of an expansion of order deriv - 1).
template <sk_i32 M, typename T>
SWISK_FN void bspline_contract_body(SkIdx id, SWISK_CONST BsplineParams& p, SWISK_GLOBAL const T* x,
                                    SWISK_GLOBAL const T* grid, SWISK_GLOBAL const T* grad, SWISK_GLOBAL T* gx) {
  typedef typename sk_acc<T>::type A;
  const sk_u64 total = sk_u64(p.rows) * p.in;
  const sk_u64 step = sk_u64(id.bdx) * id.gdx;
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < total; e += step) {
    const sk_u64 n = e / p.in, i = e % p.in;
    SWISK_GLOBAL const T* g = grid + i * p.n_knots;
    SWISK_GLOBAL const T* row = grad + n * p.width;
    const A xv = A(x[e]);
    A v[M + 1];
    const sk_i32 span = bspline_local_m<M>(xv, g, sk_i32(p.n_knots), sk_i32(p.order), sk_i32(p.deriv), v);
    A acc = span == -2 ? v[0] : A(0);
    SWISK_GLOBAL const T* o = row + p.base * p.in + i * p.n_basis;
    for (sk_i32 r = 0; r <= M; ++r) {
      const sk_i32 j = span - M + r;
      if (span >= 0 && j >= 0 && j < sk_i32(p.n_basis)) acc += A(o[j]) * v[r];
    }
    if (!bspline_row_ok<A>(g, sk_i32(p.n_knots))) acc = sk_nan(acc);
    if (p.base) acc += A(row[i]) * sk_silu_deriv(xv, sk_i32(p.deriv));
    gx[e] = T(acc);
  }
}

#if defined(SWISK_BARRIER)
// The contraction by tiles (see above): grad's tile read coalesced into stage (spline columns) and gs
// (silu columns), gx gathered in xs and stored coalesced.
template <sk_i32 M, typename T>
SWISK_FN void bspline_contract_staged_body(SkIdx id, SWISK_CONST BsplineParams& p, SWISK_GLOBAL const T* x,
                                           SWISK_GLOBAL const T* grid, SWISK_GLOBAL const T* grad,
                                           SWISK_GLOBAL T* gx, SWISK_TG typename sk_acc<T>::type* stage) {
  typedef typename sk_acc<T>::type A;
  if (!bspline_tiled(p, 2)) {
    bspline_contract_body<M, T>(id, p, x, grid, grad, gx);
    return;
  }
  const BsplineTile t = bspline_tile(p.n_basis, p.in, 2);
  const sk_u32 nb = p.n_basis;
  SWISK_TG A* xs = stage + (t.pitch << t.lr);
  SWISK_TG A* gs = xs + ((t.f + 1) << t.lr);
  const sk_u64 tiles = bspline_tiles(p, 2);
  for (sk_u64 tile = id.bx; tile < tiles; tile += id.gdx) {
    const BsplineTileAt a = bspline_tile_at(p, t, tile);
    bspline_load_x(id, p, t, a, x, xs);
    const BsplineRowWalk w = bspline_row_walk(id, a.fv * nb);
    for (sk_u32 r = w.r; r < a.rv; r += w.rstep) {
      SWISK_GLOBAL const T* o = grad + (a.n0 + r) * p.width + sk_u64(p.base) * p.in + sk_u64(a.i0) * nb;
      for (sk_u32 q = w.q; q < w.cols; q += w.qstep) stage[r * t.pitch + q] = A(o[q]);
    }
    if (p.base)
      for (sk_u32 el = id.tx; el < (t.f << t.lr); el += id.bdx) {
        const BsplineTileEl e = bspline_tile_el(t, a, el, true);
        if (e.in) gs[e.slot] = A(grad[(a.n0 + e.r) * p.width + a.i0 + e.f]);
      }
    SWISK_BARRIER();
    for (sk_u32 el = id.tx; el < (t.f << t.lr); el += id.bdx) {
      const BsplineTileEl e = bspline_tile_el(t, a, el, false);
      if (!e.in) continue;
      SWISK_TG A* xv = xs + e.slot;
      const BsplineElement<M, A> l = bspline_local_element<M>(p, grid, a.i0 + e.f, *xv);
      A acc = l.span == -2 ? l.v[0] : A(0);
      SWISK_TG const A* o = stage + e.r * t.pitch + e.f * nb;
      for (sk_i32 q = 0; q <= M; ++q) {
        const sk_i32 j = l.span - M + q;
        if (l.span >= 0 && j >= 0 && j < sk_i32(nb)) acc += o[j] * l.v[q];
      }
      if (!l.ok) acc = sk_nan(acc);
      if (p.base) acc += gs[e.slot] * sk_silu_deriv(*xv, sk_i32(p.deriv));
      *xv = acc;
    }
    SWISK_BARRIER();
    for (sk_u32 el = id.tx; el < (t.f << t.lr); el += id.bdx) {
      const BsplineTileEl e = bspline_tile_el(t, a, el, true);
      if (e.in) gx[(a.n0 + e.r) * p.in + a.i0 + e.f] = T(xs[e.slot]);
    }
    SWISK_BARRIER();
  }
}
#endif
