// B-spline math, written once for the CPU backend, CUDA and Metal.
// Bases follow Cox–de Boor on a per-feature knot vector g[0..n_knots): half-open intervals,
// zero outside [g[0], g[n_knots-1]), NaN in -> NaN out, the same operation order as efficient-kan.
#pragma once

#include "swisk/kernels/dialect.h"

#define SWISK_MAX_SPLINE_ORDER 7

// Parameters of the basis kernels (plain data, shared by host, CUDA and Metal).
struct BsplineParams {
  sk_u32 rows;     // product of x's leading dimensions
  sk_u32 in;       // features (rows of the grid)
  sk_u32 n_knots;  // knots per feature
  sk_u32 order;    // spline order k
  sk_u32 n_basis;  // n_knots - 1 - order
};

// Launch geometry of both basis kernels: SWISK_STRIDE_THREADS threads per block, grid-stride over
// every (row, feature).
SWISK_HD SkGrid bspline_basis_grid(BsplineParams p) { return sk_stride_grid(sk_u64(p.rows) * p.in); }

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

// ---- kernel bodies (one thread per (row, feature), grid-stride) ---------------------------------

// out[e, j] = B_j(x[e]) for e = row * in + feature.
template <typename T>
SWISK_FN void bspline_basis_body(SkIdx id, SWISK_CONST BsplineParams& p, SWISK_GLOBAL const T* x,
                                 SWISK_GLOBAL const T* grid, SWISK_GLOBAL T* out) {
  typedef typename sk_acc<T>::type A;
  const sk_u64 total = sk_u64(p.rows) * p.in;
  const sk_u64 step = sk_u64(id.bdx) * id.gdx;
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < total; e += step) {
    SWISK_GLOBAL const T* g = grid + sk_u64(e % p.in) * p.n_knots;
    SWISK_GLOBAL T* o = out + e * p.n_basis;
    BsplineLocal<A> b = bspline_local<A>(A(x[e]), g, sk_i32(p.n_knots), sk_i32(p.order), false);
    const bool ok = bspline_row_ok<A>(g, sk_i32(p.n_knots));
    for (sk_i32 j = 0; j < sk_i32(p.n_basis); ++j) {
      const A v = bspline_pick<A>(b.v, b.span, j);
      o[j] = T(ok ? v : sk_nan(v));
    }
  }
}

// grad_x[e] = sum_j grad_out[e, j] * dB_j/dx (x[e]).
template <typename T>
SWISK_FN void bspline_basis_backward_body(SkIdx id, SWISK_CONST BsplineParams& p, SWISK_GLOBAL const T* x,
                                          SWISK_GLOBAL const T* grid, SWISK_GLOBAL const T* grad_out,
                                          SWISK_GLOBAL T* grad_x) {
  typedef typename sk_acc<T>::type A;
  const sk_i32 M = SWISK_MAX_SPLINE_ORDER;
  const sk_u64 total = sk_u64(p.rows) * p.in;
  const sk_u64 step = sk_u64(id.bdx) * id.gdx;
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < total; e += step) {
    SWISK_GLOBAL const T* g = grid + sk_u64(e % p.in) * p.n_knots;
    SWISK_GLOBAL const T* go = grad_out + e * p.n_basis;
    BsplineLocal<A> b = bspline_local<A>(A(x[e]), g, sk_i32(p.n_knots), sk_i32(p.order), true);
    A acc = b.span == -2 ? b.d[0] : A(0);
    for (sk_i32 r = 0; r <= M; ++r) {
      const sk_i32 j = b.span - M + r;
      if (b.span >= 0 && j >= 0 && j < sk_i32(p.n_basis)) acc += A(go[j]) * b.d[r];
    }
    grad_x[e] = T(bspline_row_ok<A>(g, sk_i32(p.n_knots)) ? acc : sk_nan(acc));
  }
}
