// Uniform knots (efficient-kan's grids until update_grid): in its knot interval s, x's order+1 bases are
// fixed polynomials of the local coordinate t = (x - g0)/h - s, so a block of features is evaluated
// in vector lanes without gathering knots. Used for orders 1..7 when every feature's knots are uniform
// to a few ulp; the interval comes from floor() and the end knots, and at an inner knot the pieces
// on either side agree (orders >= 1, derivative orders below the spline order). Also silu_row: the base
// branch's silu of a row through the vector exp.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "swisk/kernels/bspline.h"
#include "vec_math.h"

namespace swisk::cpu {

// silu^(m) of a row, through the vector exp for m <= 1 (1 - σ(x) taken as σ(-x)); one loop per order,
// each vectorised.
template <typename T, typename A, typename O>
void silu_row(const T* x, O* out, int64_t n, int m) {
  if (m > 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = O(sk_silu_deriv(A(x[i]), m));
  } else if (m == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const A v = A(x[i]);
      const A e = vexp_neg<A>(v < A(0) ? v : -v), r = A(1) / (A(1) + e);  // e^-|x|
      out[i] = O((v >= A(0) ? r : e * r) * (A(1) + v * (v >= A(0) ? e * r : r)));
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const A v = A(x[i]);
      const A e = vexp_neg<A>(v < A(0) ? v : -v), r = A(1) / (A(1) + e);
      out[i] = O(v * (v >= A(0) ? r : e * r));
    }
  }
}

// Calls f(std::integral_constant<int, K>) for the runtime spline order k: K = k for First <= k <= 7
// (the orders with templated kernels), First below, 7 above.
template <int First = 0, class F>
void dispatch_order(int k, F&& f) {
  if constexpr (First >= SWISK_MAX_SPLINE_ORDER) {
    return f(std::integral_constant<int, SWISK_MAX_SPLINE_ORDER>{});
  } else {
    if (k <= First) return f(std::integral_constant<int, First>{});
    return dispatch_order<First + 1>(k, std::forward<F>(f));
  }
}

template <typename A>
struct UniformKnots {
  std::vector<A> g0, g1, inv_h;  // per feature: first and last knot, 1 / spacing
  bool all = false;              // every feature uniform: the path applies

  UniformKnots() = default;

  // The knots of rows of in features laid end to end: entry j is feature j % in, for j < in + 16, so a
  // block of lanes that starts at feature f of a row reads its knots from entry f.
  UniformKnots tiled(int64_t in) const {
    UniformKnots t;
    t.all = all;
    for (int64_t j = 0; j < in + 16; ++j)
      t.g0.push_back(g0[j % in]), t.g1.push_back(g1[j % in]), t.inv_h.push_back(inv_h[j % in]);
    return t;
  }

  template <typename T>
  UniformKnots(const T* grid, const BsplineParams& p) {
    const int64_t nk = p.n_knots;
    if (p.order < 1 || p.order > 7 || p.deriv > 1 || p.deriv >= p.order || nk < 2) return;
    const int64_t padded = (int64_t(p.in) + 15) / 16 * 16;  // whole blocks of lanes; pads: inside, unused
    g0.assign(padded, A(0)), g1.assign(padded, A(1)), inv_h.assign(padded, A(1));
    for (int64_t i = 0; i < p.in; ++i) {
      const T* g = grid + i * nk;
      const double a = double(g[0]), b = double(g[nk - 1]), h = (b - a) / double(nk - 1);
      const double tol = 16 * double(std::numeric_limits<T>::epsilon()) * std::fmax(std::fabs(a), std::fabs(b));
      for (int64_t t = 1; t + 1 < nk; ++t)
        if (!(std::fabs(double(g[t]) - (a + double(t) * h)) <= tol)) return;
      g0[i] = A(g[0]), g1[i] = A(g[nk - 1]), inv_h[i] = A(1.0 / h);
    }
    all = true;
  }
};

// Input dtypes the uniform path takes (its knot check reads numeric_limits of the storage type).
template <typename T>
constexpr bool uniform_dtype() {
  return std::is_same_v<T, float> || std::is_same_v<T, double>;
}

// Lanes per block (64 bytes of A; GCC vectorises the loops at the clone's width).
template <typename A>
constexpr int uniform_lanes() {
  return sizeof(A) == 4 ? 16 : 8;
}

// The K+1 local values (bases s-K .. s, or their first derivatives when deriv) of features [i0, i0+L)
// of one row (x: the row in A, padded to whole blocks) into v[q][l], spans into span[l] (-1 outside,
// -2 NaN).
template <int K, typename A, int L = uniform_lanes<A>()>
inline void uniform_block(const UniformKnots<A>& u, const A* x, int64_t i0, int64_t nk, bool deriv, A (*v)[L],
                          int* span) {
  A t[L];
  const A *g0 = u.g0.data() + i0, *g1 = u.g1.data() + i0, *ih = u.inv_h.data() + i0, *xs = x + i0;
  const A top = A(nk - 2);
#pragma omp simd
  for (int l = 0; l < L; ++l) {
    const A xv = xs[l];
    const A uu = (xv - g0[l]) * ih[l];
    A fl = std::floor(uu);
    fl = fl < A(0) ? A(0) : (fl > top ? top : fl);
    const A tt = uu - fl;
    t[l] = tt < A(0) ? A(0) : (tt > A(1) ? A(1) : tt);
    const bool inside = xv >= g0[l] && xv < g1[l];
    span[l] = xv != xv ? -2 : (inside ? int(fl) : -1);
  }
  A n[K + 1][L];
  for (int l = 0; l < L; ++l) {
    n[0][l] = A(1);
    for (int q = 1; q <= K; ++q) n[q][l] = A(0);
  }
  for (int k = 1; k <= K; ++k) {  // level k from level k-1 (bases q = 0..k-1 -> 0..k), downwards in place
    const A rk = A(1) / A(k);
    const bool d = deriv && k == K;
    for (int q = k; q >= 0; --q) {
#pragma omp simd
      for (int l = 0; l < L; ++l) {
        const A lo = q > 0 ? n[q - 1][l] : A(0), hi = q < k ? n[q][l] : A(0);
        n[q][l] = d ? (lo - hi) * ih[l] : ((t[l] + A(k - q)) * lo + (A(q + 1) - t[l]) * hi) * rk;
      }
    }
  }
  for (int q = 0; q <= K; ++q)
    for (int l = 0; l < L; ++l) v[q][l] = span[l] == -2 ? A(NAN) : (span[l] == -1 ? A(0) : n[q][l]);
}

}  // namespace swisk::cpu
