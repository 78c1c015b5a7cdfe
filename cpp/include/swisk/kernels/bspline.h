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

// Where bspline_local_m reads a feature's knots: g(j), and div(num, k, j) = num / (g[j+k] - g[j]).
// BsplineKnotRow reads the knot row itself (any address space) and divides; BsplineKnotTable reads a
// block's table in shared memory (bspline_load_table), whose reciprocals make the divisions products.
template <typename P>
struct BsplineKnotRow {
  P g;
};
template <typename A>
struct BsplineKnotTable {
  SWISK_TG const A* t;  // one feature's table: knots, then each level's reciprocals
  sk_u32 nk;
};
// Offset of level k's reciprocals 1/(g[j+k] - g[j]) (j < n_knots - k) in a feature's table; level 0:
// the knots. The table ends with 1 (the knots strictly increase) or 0.
SWISK_HD sk_u32 bspline_table_at(sk_u32 nk, sk_u32 k) { return k * nk - k * (k - 1) / 2; }
SWISK_HD sk_u32 bspline_table_len(sk_u32 nk, sk_u32 order) { return bspline_table_at(nk, order + 1) + 1; }

template <typename A, typename P>
SWISK_FN A bspline_knot(BsplineKnotRow<P> s, sk_i32 j) { return A(s.g[j]); }
template <typename A, typename P>
SWISK_FN A bspline_div(BsplineKnotRow<P> s, A num, sk_i32 k, sk_i32 j) { return num / (A(s.g[j + k]) - A(s.g[j])); }
template <typename A>
SWISK_FN A bspline_knot(BsplineKnotTable<A> s, sk_i32 j) { return s.t[j]; }
template <typename A>
SWISK_FN A bspline_div(BsplineKnotTable<A> s, A num, sk_i32 k, sk_i32 j) {
  return num * s.t[bspline_table_at(s.nk, sk_u32(k)) + sk_u32(j)];
}

// v[r] = B^(deriv)_{span-M+r, order}(x) for r in [M - order, M], else 0; returns span (-1 outside the
// grid, -2 for NaN: every v is NaN). Levels past order - deriv take derivative steps
// k·(B_{j,k-1}/(g[j+k]-g[j]) - B_{j+1,k-1}/(g[j+k+1]-g[j+1])) instead of Cox–de Boor's; zero past order.
template <sk_i32 M, typename A, typename S>
SWISK_FN sk_i32 bspline_local_src(A x, S src, sk_i32 n_knots, sk_i32 order, sk_i32 deriv, SWISK_THREAD A* v) {
  for (sk_i32 r = 0; r <= M; ++r) v[r] = A(0);
  if (sk_isnan(x)) {
    for (sk_i32 r = 0; r <= M; ++r) v[r] = x;
    return -2;
  }
  if (!(x >= bspline_knot<A>(src, 0) && x < bspline_knot<A>(src, n_knots - 1))) return -1;
  sk_i32 lo = 0, hi = n_knots - 1;  // invariant: g[lo] <= x < g[hi]
  while (hi - lo > 1) {
    const sk_i32 mid = (lo + hi) / 2;
    if (x >= bspline_knot<A>(src, mid)) lo = mid;
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
        const A next = r < M ? v[r + 1] : A(0);
        if (step) nv = A(k) * (bspline_div(src, v[r], k, j) - bspline_div(src, next, k, j + 1));
        else
          nv = bspline_div(src, x - bspline_knot<A>(src, j), k, j) * v[r] +
               bspline_div(src, bspline_knot<A>(src, j + k + 1) - x, k, j + 1) * next;
      }
      v[r] = nv;
    }
  }
  return s;
}
template <sk_i32 M, typename A, typename P>
SWISK_FN sk_i32 bspline_local_m(A x, P g, sk_i32 n_knots, sk_i32 order, sk_i32 deriv, SWISK_THREAD A* v) {
  BsplineKnotRow<P> src;
  src.g = g;
  return bspline_local_src<M>(x, src, n_knots, order, deriv, v);
}

// Basis value j from the local values of bspline_local_m (static indexing only).
template <sk_i32 M, typename A>
SWISK_FN A bspline_pick_m(SWISK_THREAD const A* v, sk_i32 span, sk_i32 j) {
  A out = span == -2 ? v[0] : A(0);
  for (sk_i32 r = 0; r <= M; ++r)
    if (span >= 0 && span - M + r == j) out = v[r];
  return out;
}

// silu^(m)(x) = x·σ^(m)(x) + m·σ^(m-1)(x). With s = σ(x) and t = 1 - s = σ(-x), both to full relative
// precision from one exponential e^-|x| and one division, σ' = s·t and t' = -s·t: σ^(j) is a homogeneous
// polynomial of degree j + 1 in (s, t), Σ_a c_a s^a t^(j+1-a), from σ = s by (s^a t^b)' = a·s^a t^(b+1) -
// b·s^(a+1) t^b. Whichever of s, t is small only scales small terms: no large terms cancel (a polynomial
// in s alone lost ~4x per order in fp32 for x > 0, 1.9e-3 relative at the 7th). Orders 1, 2 closed form.
template <typename A>
SWISK_FN A sk_silu_deriv(A x, sk_i32 m) {
  const A e = sk_exp(x < A(0) ? x : -x), r = A(1) / (A(1) + e);
  const bool pos = x >= A(0);
  const A sp = pos ? r : e * r, sm = pos ? e * r : r;
  if (m == 0) return x * sp;
  if (m == 1) return sp * (A(1) + x * sm);
  if (m == 2) return sp * sm * (A(2) + x * (sm - sp));
  const sk_i32 D = SWISK_MAX_SILU_DERIVATIVE + 2;
  A c[D], tp[D], prev = A(0), cur = A(0);  // c[a]: the coefficient of s^a t^(j+1-a); tp[b] = t^b
  tp[0] = A(1);
  for (sk_i32 b = 1; b < D; ++b) tp[b] = tp[b - 1] * sm;
  for (sk_i32 a = 0; a < D; ++a) c[a] = a == 1 ? A(1) : A(0);
  for (sk_i32 j = 0; j <= SWISK_MAX_SILU_DERIVATIVE; ++j) {
    if (j > m) break;
    A val = A(0), sa = A(1);
    for (sk_i32 a = 0; a < D; ++a) {
      if (a <= j + 1) val += c[a] * sa * tp[j + 1 - a];
      sa *= sp;
    }
    prev = cur;
    cur = val;
    for (sk_i32 a = D - 1; a >= 1; --a) c[a] = A(a) * c[a] - A(j + 2 - a) * c[a - 1];
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
