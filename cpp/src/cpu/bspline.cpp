// CPU B-spline expansion and contraction. Only order+1 bases are non-zero per input: the hot paths
// (orders <= 7, values and first derivatives) take the order-templated recursion of kernels/kan.h
// with knot-difference reciprocals computed once per call; other orders and derivative orders take
// the general one (kernels/bspline.h). Rows are split between threads; results do not depend on it.
#include "swisk/ops/bspline.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "dtype_dispatch.h"
#include "clones.h"
#include "parallel.h"
#include "swisk/kernels/kan.h"
#include "bspline_uniform.h"
#include "vec_math.h"

namespace swisk::cpu {
namespace {

constexpr int64_t kGrain = 16;  // rows per parallel chunk

template <typename A>
struct Knots {
  std::vector<A> inv;  // (in, order, n_knots): 1 / (g[j+k] - g[j]), for the templated path
  template <typename T>
  Knots(const T* grid, const BsplineParams& p, bool fast) {
    if (!fast) return;
    const int64_t nk = p.n_knots, K = p.order;
    inv.assign(size_t(p.in) * K * nk, A(0));
    for (int64_t i = 0; i < p.in; ++i)
      for (int64_t k = 1; k <= K; ++k)
        for (int64_t j = 0; j + k < nk; ++j)
          inv[(i * K + k - 1) * nk + j] = A(1) / (A(grid[i * nk + j + k]) - A(grid[i * nk + j]));
  }
};

// Writes feature i's n_basis columns from the local values v[0..K] of bases span-K .. span.
template <typename T, typename A>
inline void scatter(T* o, int64_t nb, const A* v, int K, int span) {
  if (span == -2) {
    for (int64_t j = 0; j < nb; ++j) o[j] = T(v[0]);
    return;
  }
  for (int64_t j = 0; j < nb; ++j) o[j] = T(0);
  if (span < 0) return;
  for (int q = 0; q <= K; ++q) {
    const int64_t j = int64_t(span) - K + q;
    if (j >= 0 && j < nb) o[j] = T(v[q]);
  }
}

// The local values (v, derivative order p.deriv) of x at feature i, for order K <= M.
template <int M, typename T, typename A>
inline int local_general(const BsplineParams& p, const T* grid, A xv, int64_t i, A* v) {
  A w[M + 1];
  const int span = bspline_local_m<M>(xv, grid + i * p.n_knots, int(p.n_knots), int(p.order), int(p.deriv), w);
  for (int q = 0; q <= int(p.order); ++q) v[q] = w[M - int(p.order) + q];
  return span;
}

template <int K, typename T, typename A>
inline int local_fast(const BsplineParams& p, const T* grid, const Knots<A>& kn, A xv, int64_t i, A* v) {
  A val[K + 1], dv[K + 1];
  const int span = bspline_local_k<K>(xv, grid + i * p.n_knots, kn.inv.data() + i * K * int64_t(p.n_knots),
                                      int(p.n_knots), val, dv);
  for (int q = 0; q <= K; ++q) v[q] = p.deriv == 0 ? val[q] : dv[q];
  return span;
}

// f(local) with local(xv, i, v) -> span for this call's order and derivative.
template <typename T, typename A, class F>
void with_local(const BsplineParams& p, const T* grid, const Knots<A>& kn, F&& f) {
  const bool fast = p.order <= 7 && p.deriv <= 1;
  auto fast_k = [&](auto k) {
    f([&](A xv, int64_t i, A* v) { return local_fast<k(), T, A>(p, grid, kn, xv, i, v); });
  };
  if (fast) return dispatch_order(int(p.order), fast_k);
  auto general = [&](auto m) {
    f([&](A xv, int64_t i, A* v) { return local_general<m(), T, A>(p, grid, xv, i, v); });
  };
  if (p.order <= 7) return general(std::integral_constant<int, 7>{});
  if (p.order <= 15) return general(std::integral_constant<int, 15>{});
  if (p.order <= 31) return general(std::integral_constant<int, 31>{});
  static_assert(SWISK_MAX_CPU_SPLINE_ORDER == 63, "the general path's largest bucket");
  general(std::integral_constant<int, 63>{});
}

bool fast_path(const BsplineParams& p) { return p.order <= 7 && p.deriv <= 1; }

// Rows [lo, hi) of the expanded operand (AVX2+FMA where the CPU has them).
template <class Local, typename T, typename A>
SK_CLONES_FLAT void expand_rows(const BsplineParams& p, const Local& local, const T* x, T* out, int64_t lo,
                                   int64_t hi) {
  A v[SWISK_MAX_CPU_SPLINE_ORDER + 1];
  for (int64_t n = lo; n < hi; ++n) {
    const T* xr = x + n * p.in;
    T* row = out + n * p.width;
    if (p.base) silu_row<T, A, T>(xr, row, p.in, int(p.deriv));
    T* o = row + p.base * p.in;
    for (int64_t i = 0; i < p.in; ++i) {
      const int span = local(A(xr[i]), i, v);
      scatter(o + i * p.n_basis, p.n_basis, v, int(p.order), span);
    }
  }
}

// Rows [lo, hi) of the contraction; silu: a row of scratch.
template <class Local, typename T, typename A>
SK_CLONES_FLAT void contract_rows(const BsplineParams& p, const Local& local, const T* x, const T* grad, T* gx,
                                     A* silu, int64_t lo, int64_t hi) {
  A v[SWISK_MAX_CPU_SPLINE_ORDER + 1];
  for (int64_t n = lo; n < hi; ++n) {
    const T* xr = x + n * p.in;
    const T* g = grad + n * p.width;
    const T* gb = g + p.base * p.in;
    if (p.base) silu_row<T, A, A>(xr, silu, p.in, int(p.deriv));
    for (int64_t i = 0; i < p.in; ++i) {
      const int span = local(A(xr[i]), i, v);
      A acc = span == -2 ? v[0] : A(0);
      for (int q = 0; span >= 0 && q <= int(p.order); ++q) {
        const int64_t j = int64_t(span) - p.order + q;
        if (j >= 0 && j < p.n_basis) acc += A(gb[i * p.n_basis + j]) * v[q];
      }
      if (p.base) acc += A(g[i]) * silu[i];
      gx[n * p.in + i] = T(acc);
    }
  }
}

// The uniform-knot paths of expand_rows / contract_rows (bspline_uniform.h): blocks of L features.
template <int K, typename T, typename A>
SK_CLONES_FLAT void expand_rows_uniform(const BsplineParams& p, const UniformKnots<A>& u, const T* x, T* out,
                                           int64_t lo, int64_t hi) {
  constexpr int L = uniform_lanes<A>();
  std::vector<A> xa(u.g0.size(), A(0));
  A v[K + 1][L];
  int span[L];
  for (int64_t n = lo; n < hi; ++n) {
    const T* xr = x + n * p.in;
    T* row = out + n * p.width;
    if (p.base) silu_row<T, A, T>(xr, row, p.in, int(p.deriv));
    for (int64_t i = 0; i < p.in; ++i) xa[i] = A(xr[i]);
    T* o = row + p.base * p.in;
    std::fill(o, o + int64_t(p.in) * p.n_basis, T(0));  // then only the non-zero bases are stored
    for (int64_t i0 = 0; i0 < p.in; i0 += L) {
      uniform_block<K, A>(u, xa.data(), i0, p.n_knots, p.deriv == 1, v, span);
      for (int l = 0; l < L && i0 + l < p.in; ++l) {
        T* seg = o + (i0 + l) * p.n_basis;
        if (span[l] == -2) std::fill(seg, seg + p.n_basis, T(v[0][l]));
        for (int q = 0; span[l] >= 0 && q <= K; ++q) {
          const int64_t j = int64_t(span[l]) - K + q;
          if (j >= 0 && j < p.n_basis) seg[j] = T(v[q][l]);
        }
      }
    }
  }
}

template <int K, typename T, typename A>
SK_CLONES_FLAT void contract_rows_uniform(const BsplineParams& p, const UniformKnots<A>& u, const T* x,
                                             const T* grad, T* gx, A* silu, int64_t lo, int64_t hi) {
  constexpr int L = uniform_lanes<A>();
  std::vector<A> xa(u.g0.size(), A(0));
  A v[K + 1][L];
  int span[L];
  for (int64_t n = lo; n < hi; ++n) {
    const T* xr = x + n * p.in;
    const T* g = grad + n * p.width;
    const T* gb = g + p.base * p.in;
    if (p.base) silu_row<T, A, A>(xr, silu, p.in, int(p.deriv));
    for (int64_t i = 0; i < p.in; ++i) xa[i] = A(xr[i]);
    for (int64_t i0 = 0; i0 < p.in; i0 += L) {
      uniform_block<K, A>(u, xa.data(), i0, p.n_knots, p.deriv == 1, v, span);
      for (int l = 0; l < L && i0 + l < p.in; ++l) {
        const int64_t i = i0 + l;
        A acc = span[l] == -2 ? v[0][l] : A(0);
        for (int q = 0; span[l] >= 0 && q <= K; ++q) {
          const int64_t j = int64_t(span[l]) - K + q;
          if (j >= 0 && j < p.n_basis) acc += A(gb[i * p.n_basis + j]) * v[q][l];
        }
        if (p.base) acc += A(g[i]) * silu[i];
        gx[n * p.in + i] = T(acc);
      }
    }
  }
}

// Runs the rows of p in parallel chunks: uniform(k, knots, lo, hi) with the order k templated where every
// feature's knots are uniform (orders 1..7, values and first derivatives), else general(local, lo, hi).
template <typename T, typename A, class Uniform, class General>
void for_rows(const BsplineParams& p, const T* grid, Uniform&& uniform, General&& general) {
  if constexpr (uniform_dtype<T>()) {
    const UniformKnots<A> u(grid, p);
    if (u.all)
      return dispatch_order<1>(int(p.order), [&](auto k) {
        parallel_for(p.rows, kGrain, [&](int64_t lo, int64_t hi) { uniform(k, u, lo, hi); });
      });
  }
  const Knots<A> kn(grid, p, fast_path(p));
  with_local<T, A>(p, grid, kn, [&](auto local) {
    parallel_for(p.rows, kGrain, [&](int64_t lo, int64_t hi) { general(local, lo, hi); });
  });
}

void expand(const BsplineBasisArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order, a.derivative, a.base);
  dispatch_float<true>(a.x.dtype, "bspline_expand", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const T* x = a.x.ptr<const T>();
    T* out = a.out.ptr<T>();
    for_rows<T, A>(
        p, a.grid.ptr<const T>(),
        [&](auto k, const UniformKnots<A>& u, int64_t lo, int64_t hi) {
          expand_rows_uniform<k(), T, A>(p, u, x, out, lo, hi);
        },
        [&](const auto& local, int64_t lo, int64_t hi) {
          expand_rows<std::decay_t<decltype(local)>, T, A>(p, local, x, out, lo, hi);
        });
  });
}

void contract(const BsplineContractArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order, a.derivative, a.base);
  dispatch_float<true>(a.x.dtype, "bspline_contract", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const T *x = a.x.ptr<const T>(), *g = a.grad.ptr<const T>();
    T* gx = a.grad_x.ptr<T>();
    for_rows<T, A>(
        p, a.grid.ptr<const T>(),
        [&](auto k, const UniformKnots<A>& u, int64_t lo, int64_t hi) {
          std::vector<A> silu(p.base ? p.in : 0);
          contract_rows_uniform<k(), T, A>(p, u, x, g, gx, silu.data(), lo, hi);
        },
        [&](const auto& local, int64_t lo, int64_t hi) {
          std::vector<A> silu(p.base ? p.in : 0);
          contract_rows<std::decay_t<decltype(local)>, T, A>(p, local, x, g, gx, silu.data(), lo, hi);
        });
  });
}

}  // namespace

void register_bspline(Registry& r) {
  r.add<BsplineBasisArgs>("bspline_expand", Backend::cpu, &expand);
  r.add<BsplineContractArgs>("bspline_contract", Backend::cpu, &contract);
}

}  // namespace swisk::cpu
