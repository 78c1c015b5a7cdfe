// The GPUs' tiled B-spline expansion and contraction (CUDA and Metal; the CPU runs kernels/bspline.h's
// math in its own loops): tile geometry, the blocks' knot tables, the staged bodies.
#pragma once

#include "swisk/kernels/bspline.h"

// A block takes a tile of F features (a power of two, <= 32, fewer for fewer features) by R rows (2^lr,
// F·R = 512 but for the shared memory), x's tile (and grad's) read coalesced into shared memory, one
// thread per element with consecutive threads on consecutive rows of one feature. The expansion writes
// each element's n_basis values to stage (rows of F·n_basis + 1 floats: odd for an even F·n_basis, so
// the lanes hit different banks) and the block stores the tile's rows of F·n_basis consecutive columns
// coalesced.
// xs (R rows of F + 1) holds x, then each element's silu column (expand) or its gx (contract). After
// them the F features' knot table (bspline_table_len floats each: knots, reciprocals of their
// differences, validity), built when a block's tile starts another group of features (the grid keeps
// a block on one group): the elements then read knots from shared memory and multiply where the
// untiled bodies divide. Tiles whose smallest form (one feature, one row) does not fit take the
// untiled bodies.
#define SWISK_BSPLINE_STAGE 7168  // floats of shared memory (28 KiB)
struct BsplineTile {
  sk_u32 f, lf, lr;  // features (2^lf), log2 rows
  sk_u32 pitch;      // stage's row: f·n_basis + 1
};
// extra: arrays of R·(F + 1) besides stage (expand 1, contract 2); tl: a feature's table.
SWISK_HD sk_u64 bspline_tile_floats(sk_u32 nb, sk_u32 tl, sk_u32 f, sk_u32 lr, sk_u32 extra) {
  return ((sk_u64(f) * nb + 1 + sk_u64(extra) * (f + 1)) << lr) + sk_u64(f) * tl;
}
SWISK_HD sk_u32 bspline_tile_table(SWISK_CONST BsplineParams& p) { return bspline_table_len(p.n_knots, p.order); }
// The most elements (at most 512) that fit, then the most features.
SWISK_HD BsplineTile bspline_tile(SWISK_CONST BsplineParams& p, sk_u32 extra) {
  const sk_u32 nb = p.n_basis, tl = bspline_tile_table(p);
  sk_i32 top = 0;
  while (top < 5 && (1u << top) < p.in) ++top;
  BsplineTile t;
  t.lf = 0;
  t.lr = 0;
  bool found = false;
  for (sk_i32 total = 9; total >= 0 && !found; --total)  // log2 of F·R
    for (sk_i32 lf = total < top ? total : top; lf >= 0 && !found; --lf)
      if (bspline_tile_floats(nb, tl, 1u << lf, sk_u32(total - lf), extra) <= SWISK_BSPLINE_STAGE) {
        t.lf = sk_u32(lf);
        t.lr = sk_u32(total - lf);
        found = true;
      }
  t.f = 1u << t.lf;
  t.pitch = t.f * nb + 1;
  return t;
}
SWISK_HD bool bspline_tiled(SWISK_CONST BsplineParams& p, sk_u32 extra) {
  return bspline_tile_floats(p.n_basis, bspline_tile_table(p), 1, 0, extra) <= SWISK_BSPLINE_STAGE;
}
SWISK_HD sk_u64 bspline_tiles(SWISK_CONST BsplineParams& p, sk_u32 extra) {
  const BsplineTile t = bspline_tile(p, extra);
  return sk_tiles(p.rows, 1u << t.lr) * sk_tiles(p.in, t.f);
}
// The grid of the expansion (extra = 1) and the contraction (extra = 2): one block per tile, or at most
// 4096 blocks looping over tiles, a multiple of the feature groups when there are at most 4096 of them
// (a block then stays on one group and builds its knot table once); or the untiled bodies' grid.
SWISK_HD SkGrid bspline_tiled_grid(SWISK_CONST BsplineParams& p, sk_u32 extra) {
  if (!bspline_tiled(p, extra)) return bspline_basis_grid(p);
  const sk_u64 tiles = bspline_tiles(p, extra), groups = sk_tiles(p.in, bspline_tile(p, extra).f);
  const sk_u64 cap = groups > 0 && groups <= 4096 ? 4096 - 4096 % groups : 4096;
  return sk_tile_grid(tiles > cap ? cap : tiles, 1);
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

// The knot table of features i0 .. i0 + fv (bspline_table_at): each entry from global memory once per
// block and group of features, the level reciprocals by one division each.
template <typename T, typename A>
SWISK_FN void bspline_load_table(SkIdx id, SWISK_CONST BsplineParams& p, sk_u32 i0, sk_u32 fv,
                                 SWISK_GLOBAL const T* grid, SWISK_TG A* table) {
  const sk_u32 nk = p.n_knots, tl = bspline_table_len(nk, p.order);
  for (sk_u32 q = id.tx; q < fv * tl; q += id.bdx) {
    const sk_u32 f = q / tl, c = q - f * tl;
    SWISK_GLOBAL const T* g = grid + sk_u64(i0 + f) * nk;
    A val;
    if (c + 1 == tl) {
      val = bspline_row_ok<A>(g, sk_i32(nk)) ? A(1) : A(0);
    } else if (c < nk) {
      val = A(g[c]);
    } else {
      sk_u32 k = 1;
      while (c >= bspline_table_at(nk, k + 1)) ++k;
      const sk_u32 j = c - bspline_table_at(nk, k);
      val = A(1) / (A(g[j + k]) - A(g[j]));
    }
    table[q] = val;
  }
}
// The local bases of xv from a feature's table (its validity from the table's last entry).
template <sk_i32 M, typename A>
SWISK_FN BsplineElement<M, A> bspline_table_element(SWISK_CONST BsplineParams& p, SWISK_TG const A* table, A xv) {
  BsplineKnotTable<A> src;
  src.t = table;
  src.nk = p.n_knots;
  BsplineElement<M, A> l;
  l.span = bspline_local_src<M>(xv, src, sk_i32(p.n_knots), sk_i32(p.order), sk_i32(p.deriv), l.v);
  l.ok = table[bspline_table_len(p.n_knots, p.order) - 1] != A(0);
  return l;
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
  const BsplineTile t = bspline_tile(p, 1);
  const sk_u32 nb = p.n_basis, tl = bspline_tile_table(p);
  SWISK_TG A* xs = stage + (t.pitch << t.lr);
  SWISK_TG A* table = xs + ((t.f + 1) << t.lr);
  const sk_u64 tiles = bspline_tiles(p, 1);
  sk_u32 group = ~0u;  // the features whose table the block holds
  for (sk_u64 tile = id.bx; tile < tiles; tile += id.gdx) {  // the same trip count for the whole block
    const BsplineTileAt a = bspline_tile_at(p, t, tile);
    bspline_load_x(id, p, t, a, x, xs);
    if (a.i0 != group) bspline_load_table(id, p, a.i0, a.fv, grid, table);
    group = a.i0;
    SWISK_BARRIER();
    for (sk_u32 el = id.tx; el < (t.f << t.lr); el += id.bdx) {  // a fill, then the k + 1 non-zero values
      const BsplineTileEl e = bspline_tile_el(t, a, el, false);
      if (!e.in) continue;
      SWISK_TG A* xv = xs + e.slot;
      const BsplineElement<M, A> l = bspline_table_element<M>(p, table + e.f * tl, *xv);
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
  const BsplineTile t = bspline_tile(p, 2);
  const sk_u32 nb = p.n_basis, tl = bspline_tile_table(p);
  SWISK_TG A* xs = stage + (t.pitch << t.lr);
  SWISK_TG A* gs = xs + ((t.f + 1) << t.lr);
  SWISK_TG A* table = gs + ((t.f + 1) << t.lr);
  const sk_u64 tiles = bspline_tiles(p, 2);
  sk_u32 group = ~0u;
  for (sk_u64 tile = id.bx; tile < tiles; tile += id.gdx) {
    const BsplineTileAt a = bspline_tile_at(p, t, tile);
    bspline_load_x(id, p, t, a, x, xs);
    if (a.i0 != group) bspline_load_table(id, p, a.i0, a.fv, grid, table);
    group = a.i0;
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
      const BsplineElement<M, A> l = bspline_table_element<M>(p, table + e.f * tl, *xv);
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
