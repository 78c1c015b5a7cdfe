// CPU fused KAN linear. Only order+1 bases are non-zero per input, so every (row, feature) adds
// order+2 weight rows (silu's and the bases') to y[row, :]: cost independent of the grid size.
// The weights are repacked to wt (in, n_basis + 1, out) so the inner loops run contiguously over
// outputs; forward threads over rows, backward over features (each thread owns its weight-gradient
// rows and walks the batch in order: deterministic, no atomics).
#include "swisk/ops/kan.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "clones.h"
#include "dtype_dispatch.h"
#include "parallel.h"

namespace swisk::cpu {
namespace {

constexpr int64_t kRows = 32;   // forward: rows per block (they reuse each feature's weight rows from cache)
constexpr int64_t kOuts = 256;  // forward: outputs per accumulator chunk
constexpr int64_t kFeats = 1;   // backward: features per pass over the batch (their rows stay in L1)
constexpr int64_t kBatch = 16;  // backward: rows whose bases are evaluated together

// Items per parallel chunk so that a chunk holds at least kMinWork multiply-adds: below that, forking
// threads costs more than it saves (one small layer runs serially).
constexpr int64_t kMinWork = 1 << 16;
int64_t work_grain(int64_t grain, int64_t work_per_item) {
  return std::max(grain, kMinWork / std::max<int64_t>(1, work_per_item));
}

template <typename T, typename A>
struct Ctx {
  KanParams p;
  const T *x, *grid, *bw, *sw, *sc;
  A* inv;  // (in, order, n_knots): 1 / (g[j+k] - g[j])
  A* wt;   // (in, nb + 1, out): wt[i, 0, o] = bw[o, i]; wt[i, 1 + j, o] = sw[o, i, j] * sc[o, i]; then a
           // row of zeros, read for the bases outside [0, nb) (a clamped row would give 0·inf = NaN)
  int64_t nq() const { return int64_t(p.n_basis) + 1; }
  const A* zero_row() const { return wt + int64_t(p.in) * nq() * p.out; }
  int64_t inv_size() const { return int64_t(p.in) * p.order * p.n_knots; }
};

// Fills inv and wt, in parallel over features; true when a scaled spline weight is inf or NaN.
template <typename T, typename A>
bool prepare(const Ctx<T, A>& c) {
  const KanParams& p = c.p;
  const int64_t nk = p.n_knots;
  std::atomic<bool> nonfinite{false};
  parallel_for(p.in, work_grain(8, int64_t(p.out) * (p.n_basis + 1)), [&](int64_t lo, int64_t hi) {
    bool bad = false;
    for (int64_t i = lo; i < hi; ++i) {
      const T* g = c.grid + i * nk;
      for (int64_t k = 1; k <= p.order; ++k)
        for (int64_t j = 0; j + k < nk; ++j) c.inv[(i * p.order + k - 1) * nk + j] = A(1) / (A(g[j + k]) - A(g[j]));
      for (int64_t o = 0; o < p.out; ++o) {
        const int64_t oi = o * p.in + i;
        A* w = c.wt + i * c.nq() * p.out + o;
        w[0] = p.has_base ? A(c.bw[oi]) : A(0);
        const A s = p.has_scaler ? A(c.sc[oi]) : A(1);
        for (int64_t j = 0; j < p.n_basis; ++j) {
          const A v = A(c.sw[oi * p.n_basis + j]) * s;
          w[(1 + j) * p.out] = v;
          bad |= !(v - v == A(0));
        }
      }
    }
    if (bad) nonfinite.store(true, std::memory_order_relaxed);
  });
  std::fill(c.wt + int64_t(p.in) * c.nq() * p.out, c.wt + (int64_t(p.in) * c.nq() + 1) * p.out, A(0));
  return nonfinite.load();
}

// Coefficients (and derivatives) of the K+2 rows of wt that x[n, i] touches: slot 0 is silu's.
template <int K, typename A>
struct Local {
  A c[K + 2], d[K + 2];
  int64_t row[K + 2];
};

template <int K, typename T, typename A>
Local<K, A> local(const Ctx<T, A>& c, A xv, int64_t i) {
  const KanParams& p = c.p;
  Local<K, A> l;
  const A* inv = c.inv + i * K * int64_t(p.n_knots);
  const sk_i32 span = bspline_local_k<K>(xv, c.grid + i * p.n_knots, inv, sk_i32(p.n_knots), l.c + 1, l.d + 1);
  l.c[0] = p.has_base ? kan_silu(xv) : A(0);
  l.d[0] = p.has_base ? kan_silu_grad(xv) : A(0);
  l.row[0] = 0;
  for (int q = 0; q <= K; ++q) {  // bases outside [0, nb) are zero: -1, read as the zero row
    const int64_t j = int64_t(span) - K + q;
    l.row[1 + q] = j >= 0 && j < int64_t(p.n_basis) ? 1 + j : -1;
  }
  return l;
}

// acc[o] += sum_q c[q] * w[q][o] (local copies of the pointers and coefficients: no aliasing with acc).
template <int K, typename A>
void axpy_rows(A* __restrict acc, const A* const* w_in, const A* c_in, int64_t n) {
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

// y[n_lo:n_hi, :]; the bases of a feature's rows are evaluated together (independent chains).
template <int K, typename T, typename A>
void forward_rows(const Ctx<T, A>& c, T* y, int64_t n_lo, int64_t n_hi) {
  const KanParams& p = c.p;
  const int64_t nr = n_hi - n_lo;
  A acc[kRows][kOuts];
  Local<K, A> l[kRows];
  for (int64_t o0 = 0; o0 < p.out; o0 += kOuts) {
    const int64_t on = std::min<int64_t>(kOuts, p.out - o0);
    for (int64_t r = 0; r < nr; ++r) std::fill(acc[r], acc[r] + on, A(0));
    for (int64_t i = 0; i < p.in; ++i) {
      const A* wi = c.wt + i * c.nq() * p.out + o0;
      for (int64_t r = 0; r < nr; ++r) l[r] = local<K>(c, A(c.x[(n_lo + r) * p.in + i]), i);
      for (int64_t r = 0; r < nr; ++r) {
        const A* w[K + 2];
        for (int q = 0; q < K + 2; ++q) w[q] = l[r].row[q] < 0 ? c.zero_row() + o0 : wi + l[r].row[q] * p.out;
        axpy_rows<K, A>(acc[r], w, l[r].c, on);
      }
    }
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t o = 0; o < on; ++o) y[(n_lo + r) * p.out + o0 + o] = T(acc[r][o]);
  }
}

// One (row, feature) of the backward: returns sum_o gy[o] sum_q d[q] w[q][o]; gw[q][o] += c[q] gy[o].
template <int K, typename T, typename A>
A backward_one(const A* const* w_in, A* const* gw_in, const A* c_in, const A* d_in, const T* gy,
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

// Features [i_lo, i_hi): this thread owns their weight-gradient rows and walks the batch in order, in
// blocks of kFeats features x kBatch rows whose bases are evaluated together.
template <int K, typename T, typename A>
void backward_features(const Ctx<T, A>& c, const T* gy, T* gx, A* gwt, int64_t i_lo, int64_t i_hi) {
  const KanParams& p = c.p;
  Local<K, A> l[kBatch][kFeats];
  for (int64_t f0 = i_lo; f0 < i_hi; f0 += kFeats) {
    const int64_t nf = std::min(i_hi - f0, kFeats);
    for (int64_t n0 = 0; n0 < p.rows; n0 += kBatch) {
      const int64_t nn = std::min<int64_t>(kBatch, p.rows - n0);
      for (int64_t r = 0; r < nn; ++r)
        for (int64_t f = 0; f < nf; ++f) l[r][f] = local<K>(c, A(c.x[(n0 + r) * p.in + f0 + f]), f0 + f);
      for (int64_t r = 0; r < nn; ++r)
        for (int64_t f = 0; f < nf; ++f) {
          const int64_t base = (f0 + f) * c.nq();
          const A* w[K + 2];
          A* gw[K + 2];
          for (int q = 0; q < K + 2; ++q) {  // an absent basis: zero weights; its gradient (c = 0) into row 1
            const int64_t row = l[r][f].row[q];
            w[q] = row < 0 ? c.zero_row() : c.wt + (base + row) * p.out;
            gw[q] = gwt + (base + (row < 0 ? 1 : row)) * p.out;
          }
          gx[(n0 + r) * p.in + f0 + f] =
              T(backward_one<K, T, A>(w, gw, l[r][f].c, l[r][f].d, gy + (n0 + r) * p.out, p.out));
        }
    }
  }
}

// forward_rows / backward_features for this CPU: one clone per x86-64 ISA level (AVX-512, AVX2+FMA,
// baseline; cpu/clones.h), everything they call flattened into them.
template <int K, typename T, typename A>
SK_CLONES_FLAT void forward_rows_any(const Ctx<T, A>& c, T* y, int64_t lo, int64_t hi) {
  forward_rows<K>(c, y, lo, hi);
}

template <int K, typename T, typename A>
SK_CLONES_FLAT void backward_features_any(const Ctx<T, A>& c, const T* gy, T* gx, A* gwt, int64_t lo, int64_t hi) {
  backward_features<K>(c, gy, gx, gwt, lo, hi);
}

// Rows per parallel chunk: kRows, fewer when that would leave threads idle (results do not depend on it).
int64_t row_grain(int64_t rows) {
  const int64_t threads = max_threads(), per_thread = (rows + threads - 1) / threads;
  return std::max<int64_t>(1, std::min(kRows, per_thread));
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
  A* inv = work.ptr<A>();
  return Ctx<T, A>{p,   x.ptr<const T>(), grid.ptr<const T>(), bw.ptr<const T>(), sw.ptr<const T>(), sc.ptr<const T>(),
                   inv, inv + int64_t(p.in) * p.order * p.n_knots};
}

void forward(const KanLinearArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  dispatch_float<true>(a.x.dtype, "kan_linear", [&](auto tag) {
    using T = decltype(tag);
    const auto c = make_ctx<T>(p, a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.work);
    const bool nonfinite = prepare(c);
    T* y = a.out.ptr<T>();
    dispatch_order(a.order, [&](auto k) {
      const int64_t per_row = int64_t(p.in) * p.out * (k() + 2);
      parallel_for(p.rows, work_grain(row_grain(p.rows), per_row), [&](int64_t lo, int64_t hi) {
        for (int64_t n = lo; n < hi; n += kRows) forward_rows_any<k()>(c, y, n, std::min(hi, n + kRows));
      });
    });
    if (nonfinite) {  // rare: the formulation's 0·inf outside each row's bases (kernels/kan.h)
      sk_i32* jr = kan_nonfinite_scratch(a, p);
      const SkIdx one{0, 0, 0, 0, 1, 1, 1, 1};
      kan_nonfinite_scan_body<T>(one, p, c.sw, c.sc, jr, jr + 2 * int64_t(p.out) * p.in);
      kan_nonfinite_fix_body<T>(one, p, c.x, c.grid, jr, jr + 2 * int64_t(p.out) * p.in, y);
    }
  });
}

void backward(const KanLinearBackwardArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  dispatch_float<true>(a.x.dtype, "kan_linear_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const auto c = make_ctx<T>(p, a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.work);
    prepare(c);
    A* gwt = c.wt + (int64_t(p.in) * c.nq() + 1) * p.out + 128;  // see kan_linear_workspace
    std::fill(gwt, gwt + int64_t(p.in) * c.nq() * p.out, A(0));
    const T* gy = a.grad_out.ptr<const T>();
    T* gx = a.grad_x.ptr<T>();
    dispatch_order(a.order, [&](auto k) {
      const int64_t per_feature = int64_t(p.rows) * p.out * (k() + 2) * 2;
      parallel_for(p.in, work_grain(kFeats, per_feature),
                   [&](int64_t lo, int64_t hi) { backward_features_any<k()>(c, gy, gx, gwt, lo, hi); });
    });
    // gwt (in, nb + 1, out) -> grad_base_weight, grad_spline_weight (times the scaler), grad_spline_scaler.
    T *gbw = a.grad_base_weight.ptr<T>(), *gsw = a.grad_spline_weight.ptr<T>(), *gsc = a.grad_spline_scaler.ptr<T>();
    parallel_for(p.out, work_grain(16, int64_t(p.in) * p.n_basis), [&](int64_t lo, int64_t hi) {
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

void unpack(const KanUnpackArgs& a) {
  const int64_t out = a.x.shape[0], in = a.x.shape[1], nb = a.x.shape[2];
  dispatch_float<true>(a.x.dtype, "kan_unpack", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const T *g = a.x.ptr<const T>(), *sw = a.spline_weight.ptr<const T>(), *sc = a.spline_scaler.ptr<const T>();
    T *gsw = a.grad_spline_weight.ptr<T>(), *gsc = a.grad_spline_scaler.ptr<T>();
    parallel_for(out * in, work_grain(64, nb), [&](int64_t lo, int64_t hi) {
      for (int64_t e = lo; e < hi; ++e) {
        const A s = A(sc[e]);
        A d = A(0);
        for (int64_t j = 0; j < nb; ++j) {
          const A gj = A(g[e * nb + j]);
          d += gj * A(sw[e * nb + j]);
          gsw[e * nb + j] = T(gj * s);
        }
        gsc[e] = T(d);
      }
    });
  });
}

}  // namespace

void register_kan(Registry& r) {
  r.add<KanUnpackArgs>("kan_unpack", Backend::cpu, &unpack);
  r.add<KanLinearArgs>("kan_linear", Backend::cpu, &forward);
  r.add<KanLinearBackwardArgs>("kan_linear_backward", Backend::cpu, &backward);
}

}  // namespace swisk::cpu
