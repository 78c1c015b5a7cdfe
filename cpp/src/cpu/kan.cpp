// CPU fused KAN linear. Only order+1 bases are non-zero per input, so every (row, feature) adds
// order+2 weight rows (silu's and the bases') to y[row, :]: cost independent of the grid size.
// The weights are repacked to wt (in, n_basis + 1, out) so the inner loops run contiguously over
// outputs; forward threads over rows, backward over features (each thread owns its weight-gradient
// rows and walks the batch in order: deterministic, no atomics).
#include "swisk/ops/kan.h"

#include <algorithm>
#include <cstring>

#include "dtype_dispatch.h"
#include "parallel.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SWISK_HOT __attribute__((target_clones("arch=haswell", "default")))
#else
#define SWISK_HOT
#endif

namespace swisk::cpu {
namespace {

constexpr int M = SWISK_MAX_SPLINE_ORDER;
constexpr int64_t kRows = 8;     // forward: rows per block (they share the feature's weight rows in cache)
constexpr int64_t kOuts = 256;   // forward: outputs per accumulator chunk
constexpr int64_t kFeats = 4;    // backward: features per pass over the batch

template <typename T, typename A>
struct Ctx {
  KanParams p;
  const T *x, *grid, *bw, *sw, *sc;
  A* wt;  // (in, nb + 1, out)
  int64_t nq() const { return int64_t(p.n_basis) + 1; }
};

// wt[i, 0, o] = bw[o, i]; wt[i, 1 + j, o] = sw[o, i, j] * sc[o, i].
template <typename T, typename A>
void repack(const Ctx<T, A>& c) {
  const KanParams& p = c.p;
  parallel_for(p.in, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t o = 0; o < p.out; ++o) {
        const int64_t oi = o * p.in + i;
        A* w = c.wt + i * c.nq() * p.out + o;
        w[0] = p.has_base ? A(c.bw[oi]) : A(0);
        const A s = p.has_scaler ? A(c.sc[oi]) : A(1);
        for (int64_t j = 0; j < p.n_basis; ++j) w[(1 + j) * p.out] = A(c.sw[oi * p.n_basis + j]) * s;
      }
  });
}

// Coefficients of the K+2 rows of wt (and their pointers) that x[n, i] touches: slot 0 is silu's.
template <int K, typename A>
struct Local {
  A c[K + 2], d[K + 2];
  int64_t row[K + 2];
};

template <int K, typename T, typename A>
Local<K, A> local(const Ctx<T, A>& c, A xv, int64_t i, bool deriv) {
  const KanParams& p = c.p;
  Local<K, A> l;
  const auto b = bspline_local<A>(xv, c.grid + i * p.n_knots, int(p.n_knots), K, deriv);
  l.c[0] = p.has_base ? kan_silu(xv) : A(0);
  l.d[0] = p.has_base ? kan_silu_grad(xv) : A(0);
  l.row[0] = 0;
  for (int q = 0; q <= K; ++q) {
    const int64_t j = int64_t(b.span) - K + q;
    const bool ok = (b.span >= 0 && j >= 0 && j < int64_t(p.n_basis)) || b.span == -2;
    l.c[1 + q] = ok ? b.v[M - K + q] : A(0);
    l.d[1 + q] = ok ? b.d[M - K + q] : A(0);
    l.row[1 + q] = b.span >= 0 && ok ? 1 + j : 1;
  }
  return l;
}

// acc[o] += sum_q c[q] * w[q][o] (local copies of the pointers and coefficients: no aliasing with acc).
template <int K, typename A>
SWISK_HOT void axpy_rows(A* __restrict acc, const A* const* w_in, const A* c_in, int64_t n) {
  const A* w[K + 2];
  A c[K + 2];
  for (int q = 0; q < K + 2; ++q) {
    w[q] = w_in[q];
    c[q] = c_in[q];
  }
#pragma omp simd
  for (int64_t o = 0; o < n; ++o) {
    A s = acc[o];
#pragma GCC unroll 9
    for (int q = 0; q < K + 2; ++q) s += c[q] * w[q][o];
    acc[o] = s;
  }
}

template <int K, typename T, typename A>
void forward_rows(const Ctx<T, A>& c, T* y, int64_t n_lo, int64_t n_hi) {
  const KanParams& p = c.p;
  A acc[kRows][kOuts];
  for (int64_t o0 = 0; o0 < p.out; o0 += kOuts) {
    const int64_t on = std::min<int64_t>(kOuts, p.out - o0);
    for (int64_t r = 0; r < n_hi - n_lo; ++r) std::fill(acc[r], acc[r] + on, A(0));
    for (int64_t i = 0; i < p.in; ++i) {
      const A* wi = c.wt + i * c.nq() * p.out + o0;
      for (int64_t r = 0; r < n_hi - n_lo; ++r) {
        const auto l = local<K>(c, A(c.x[(n_lo + r) * p.in + i]), i, false);
        const A* w[K + 2];
        for (int q = 0; q < K + 2; ++q) w[q] = wi + l.row[q] * p.out;
        axpy_rows<K, A>(acc[r], w, l.c, on);
      }
    }
    for (int64_t r = 0; r < n_hi - n_lo; ++r)
      for (int64_t o = 0; o < on; ++o) y[(n_lo + r) * p.out + o0 + o] = T(acc[r][o]);
  }
}

// One (row, feature) of the backward: returns sum_o gy[o] sum_q d[q] w[q][o]; gw[q][o] += c[q] gy[o].
template <int K, typename T, typename A>
SWISK_HOT A backward_one(const A* const* w_in, A* const* gw_in, const A* c_in, const A* d_in, const T* gy,
                         int64_t n) {
  const A* w[K + 2];
  A* gw[K + 2];
  A c[K + 2], d[K + 2];
  for (int q = 0; q < K + 2; ++q) {
    w[q] = w_in[q];
    gw[q] = gw_in[q];
    c[q] = c_in[q];
    d[q] = d_in[q];
  }
  A dx = A(0);
#pragma omp simd reduction(+ : dx)
  for (int64_t o = 0; o < n; ++o) {
    const A g = A(gy[o]);
    A s = A(0);
#pragma GCC unroll 9
    for (int q = 0; q < K + 2; ++q) {
      s += d[q] * w[q][o];
      gw[q][o] += c[q] * g;
    }
    dx += g * s;
  }
  return dx;
}

template <int K, typename T, typename A>
void backward_features(const Ctx<T, A>& c, const T* gy, T* gx, A* gwt, int64_t i_lo, int64_t i_hi) {
  const KanParams& p = c.p;
  for (int64_t f0 = i_lo; f0 < i_hi; f0 += kFeats) {
    const int64_t f1 = std::min(i_hi, f0 + kFeats);
    for (int64_t n = 0; n < p.rows; ++n)
      for (int64_t i = f0; i < f1; ++i) {
        const auto l = local<K>(c, A(c.x[n * p.in + i]), i, true);
        const A* w[K + 2];
        A* gw[K + 2];
        for (int q = 0; q < K + 2; ++q) {
          w[q] = c.wt + (i * c.nq() + l.row[q]) * p.out;
          gw[q] = gwt + (i * c.nq() + l.row[q]) * p.out;
        }
        gx[n * p.in + i] = T(backward_one<K, T, A>(w, gw, l.c, l.d, gy + n * p.out, p.out));
      }
  }
}

// Calls f(std::integral_constant<int, K>) for the runtime spline order.
template <class F>
void dispatch_order(int k, F&& f) {
  switch (k) {
    case 0: return f(std::integral_constant<int, 0>{});
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    default: return f(std::integral_constant<int, 7>{});
  }
}
static_assert(SWISK_MAX_SPLINE_ORDER == 7, "dispatch_order covers orders 0..7");

template <typename T>
Ctx<T, typename sk_acc<T>::type> make_ctx(const KanParams& p, const TensorView& x, const TensorView& grid,
                                          const TensorView& bw, const TensorView& sw, const TensorView& sc,
                                          const TensorView& work) {
  using A = typename sk_acc<T>::type;
  return Ctx<T, A>{p, x.ptr<const T>(), grid.ptr<const T>(), bw.ptr<const T>(), sw.ptr<const T>(),
                   sc.ptr<const T>(), work.ptr<A>()};
}

void forward(const KanLinearArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  dispatch_float<true>(a.x.dtype, "kan_linear", [&](auto tag) {
    using T = decltype(tag);
    const auto c = make_ctx<T>(p, a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.work);
    repack(c);
    T* y = a.out.ptr<T>();
    dispatch_order(a.order, [&](auto k) {
      parallel_for(p.rows, kRows, [&](int64_t lo, int64_t hi) {
        for (int64_t n = lo; n < hi; n += kRows) forward_rows<k()>(c, y, n, std::min(hi, n + kRows));
      });
    });
  });
}

void backward(const KanLinearBackwardArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  dispatch_float<true>(a.x.dtype, "kan_linear_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const auto c = make_ctx<T>(p, a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.work);
    repack(c);
    A* gwt = c.wt + int64_t(p.in) * c.nq() * p.out;
    std::fill(gwt, gwt + int64_t(p.in) * c.nq() * p.out, A(0));
    const T* gy = a.grad_out.ptr<const T>();
    T* gx = a.grad_x.ptr<T>();
    dispatch_order(a.order, [&](auto k) {
      parallel_for(p.in, kFeats, [&](int64_t lo, int64_t hi) { backward_features<k()>(c, gy, gx, gwt, lo, hi); });
    });
    // gwt (in, nb + 1, out) -> grad_base_weight, grad_spline_weight (times the scaler), grad_spline_scaler.
    T *gbw = a.grad_base_weight.ptr<T>(), *gsw = a.grad_spline_weight.ptr<T>(), *gsc = a.grad_spline_scaler.ptr<T>();
    parallel_for(p.out, 16, [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o)
        for (int64_t i = 0; i < p.in; ++i) {
          const int64_t oi = o * p.in + i;
          const A* g = gwt + i * c.nq() * p.out + o;
          if (p.has_base) gbw[oi] = T(g[0]);
          const A s = p.has_scaler ? A(c.sc[oi]) : A(1);
          A ds = A(0);
          for (int64_t j = 0; j < p.n_basis; ++j) {
            const A gj = g[(1 + j) * p.out];
            ds += gj * A(c.sw[oi * p.n_basis + j]);
            gsw[oi * p.n_basis + j] = T(gj * s);
          }
          if (p.has_scaler) gsc[oi] = T(ds);
        }
    });
  });
}

}  // namespace

void register_kan(Registry& r) {
  r.add<KanLinearArgs>("kan_linear", Backend::cpu, &forward);
  r.add<KanLinearBackwardArgs>("kan_linear_backward", Backend::cpu, &backward);
}

}  // namespace swisk::cpu
