// CPU fused KAN linear. Only order+1 bases are non-zero per input, so every (row, feature) touches
// order+2 rows of the repacked weights wt (silu's and the bases'): cost independent of the grid size.
// wt holds per feature nq rows: silu's, then the n_basis spline rows (zero rows after them when fewer
// than order+1); a knot interval touches row 0 and a window of order+1 spline rows, its coefficients
// shifted into the window at the grid's ends (place). Stored as (in, outp / lanes, nq, lanes): each
// block of a vector's outputs holds its nq rows in one run of memory (kan_cpu_layout).
// Forward: a thread per block of rows; the bases of a rows x features block are evaluated once
// (kan_locals.h), then register tiles of outputs accumulate over the block's features (no accumulator
// traffic per feature).
// Backward: a thread per feature (it owns the feature's gradient rows: deterministic, no atomics). The
// rows of a tile are grouped by knot interval, so in a group the order+2 weight and gradient rows are
// fixed: dx from dot products of gy with those rows, the weight gradient summed in registers.
// Both run chunk by chunk (kan_repack.h): the forward over chunks of outputs, the backward over chunks
// of features, each chunk's repacked weights and gradient within kan_cpu_chunk_bytes (kan.h).
// A forward or backward of a few rows (fp32/fp64) skips the repacking: kan_direct.h. The backward is
// cpu/kan_backward.cpp (its own file: the two compile in parallel).
#include "swisk/ops/kan.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <vector>

#include "bspline_uniform.h"
#include "clones.h"
#include "dtype_dispatch.h"
#include "kan_direct.h"
#include "kan_locals.h"
#include "kan_repack.h"
#include "parallel.h"
#include "vec_math.h"

namespace swisk::cpu {
inline namespace SK_VEC_ABI {  // this build's vector width (vec_math.h): cpu/wide/ builds it again
void kan_linear_backward(const KanLinearBackwardArgs& a);  // cpu/kan_backward.cpp
}

namespace {

// a[0, NV) += feature f's K+2 weight rows (w: its silu row) times its coefficients. Rows are a vector
// apart (Ctx::rs == lanes): constant offsets, so each multiply-add's address is a register plus one.
template <int K, int NV, typename A>
SK_VEC_INLINE void add_feature(VW<A>* a, const A* w, int64_t vs, const Local<K, A, false>& l) {
  constexpr int64_t L = kLanes<A>;
  const A* ws = w + l.row * L;
  for (int v = 0; v < NV; ++v) {
    VW<A> t = a[v] + l.c[0] * vload(w + v * vs);
    for (int q = 0; q <= K; ++q) t += l.c[q + 1] * vload(ws + q * L + v * vs);
    a[v] = t;
  }
}

// acc[0, NV vectors) += the nf features' contributions. Two accumulator sets (even and odd features)
// keep 2·NV independent chains of multiply-adds.
template <int K, int NV, typename A>
SK_VEC_INLINE void forward_tile(A* acc, const A* w, int64_t fs, int64_t vs, const Local<K, A, false>* l,
                                int64_t nf) {
  using V = VW<A>;
  constexpr int64_t L = kLanes<A>;
  V a[NV], b[NV];
  for (int v = 0; v < NV; ++v) a[v] = vload(acc + v * L), b[v] = V{};
  int64_t f = 0;
  for (; f + 2 <= nf; f += 2, w += 2 * fs) {
    add_feature<K, NV>(a, w, vs, l[f]);
    add_feature<K, NV>(b, w + fs, vs, l[f + 1]);
  }
  if (f < nf) add_feature<K, NV>(a, w, vs, l[f]);
  for (int v = 0; v < NV; ++v) vstore(acc + v * L, a[v] + b[v]);
}

// y[n0, n0 + nr): acc (nr, outp) and l (nr, kFeats) are the thread's scratch; xa: a padded row, or with
// c.ut nr · in + lanes values (then sl as many).
template <int K, bool ByRows, typename T, typename A>
void forward_rows(const Ctx<T, A>& c, T* y, int64_t n0, int64_t nr, A* acc, A* xa, A* sl, Local<K, A, false>* l) {
  const KanParams& p = c.p;
  constexpr int64_t L = kLanes<A>, NV = 4;
  const int64_t outp = c.outp;
  std::fill(acc, acc + nr * outp, A(0));
  for (int64_t f0 = 0; f0 < p.in; f0 += kFeats) {
    const int64_t nf = std::min<int64_t>(kFeats, p.in - f0);
    if constexpr (ByRows)
      locals_by_rows_any<K, false>(c, n0, nr, xa, sl, sl, l, 0, false);
    else
      for (int64_t r = 0; r < nr; ++r) forward_locals<K>(c, n0 + r, f0, nf, xa, l + r * kFeats);
    int64_t o = 0;
    for (; o + NV * L <= outp; o += NV * L) {
      const A* w = c.vec(c.wt, f0, o / L);
      for (int64_t r = 0; r < nr; ++r) forward_tile<K, NV>(acc + r * outp + o, w, c.fs, c.vs, l + r * kFeats, nf);
    }
    for (; o < outp; o += L) {
      const A* w = c.vec(c.wt, f0, o / L);
      for (int64_t r = 0; r < nr; ++r) forward_tile<K, 1>(acc + r * outp + o, w, c.fs, c.vs, l + r * kFeats, nf);
    }
  }
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t o = 0; o < c.oc; ++o) y[(n0 + r) * p.out + c.o0 + o] = T(acc[r * outp + o]);
}

// forward_rows for this CPU: one clone per x86-64 ISA level (AVX-512, AVX2+FMA, baseline;
// cpu/clones.h), everything it calls flattened into it.
template <int K, bool ByRows, typename T, typename A>
SK_CLONES_FLAT void forward_rows_any(const Ctx<T, A>& c, T* y, int64_t n0, int64_t nr, A* acc, A* xa, A* sl,
                                     Local<K, A, false>* l) {
  forward_rows<K, ByRows>(c, y, n0, nr, acc, xa, sl, l);
}

void forward(const KanLinearArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  const KanCpuLayout lay = kan_cpu_layout(p.in, p.out, p.n_basis, a.order, a.x.dtype, false);
  dispatch_float<true>(a.x.dtype, "kan_linear", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    auto c = make_ctx<T>(p, a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.work, lay);
    const CallKnots<T, A> knots(c, false);
    T* y = a.out.ptr<T>();
    if constexpr (std::is_same_v<T, A>) {
      if (kan_cpu_direct(p.rows, a.x.dtype))
        return dispatch_order(a.order, [&](auto k) { direct_forward<k()>(c, y); });
    }
    bool nonfinite = false;
    dispatch_order(a.order, [&](auto k) {
      const int64_t threads = max_threads(), rows = p.rows;
      const int64_t block = std::max<int64_t>(1, std::min(kRows, (rows + threads - 1) / threads));
      for_chunks(c, lay, [&] {
        nonfinite |= pack(c);
        const int64_t per_row = int64_t(p.in) * c.oc * (k() + 2);
        parallel_for((rows + block - 1) / block, work_grain(1, per_row * block), [&](int64_t lo, int64_t hi) {
          const int64_t flat = c.ut ? block * p.in + kFeats : 0;  // locals_by_rows' x and silu
          std::vector<A> acc(block * c.outp), xa(std::max((p.in + kFeats - 1) / kFeats * kFeats, flat)), sl(flat);
          std::vector<Local<k(), A, false>> l(block * kFeats);
          for (int64_t b = lo; b < hi; ++b) {
            const int64_t n0 = b * block;
            const int64_t nr = std::min(block, rows - n0);
            if constexpr (uniform_dtype<T>()) {  // c.ut: uniform knots, fp32/fp64 only
              if (c.ut) {
                forward_rows_any<k(), true>(c, y, n0, nr, acc.data(), xa.data(), sl.data(), l.data());
                continue;
              }
            }
            forward_rows_any<k(), false>(c, y, n0, nr, acc.data(), xa.data(), sl.data(), l.data());
          }
        });
      });
    });
    if (nonfinite) {  // rare: the formulation's 0·inf outside each row's bases (kernels/kan.h)
      std::vector<sk_i32> words(kan_nonfinite_words(p));  // O(out·in), only on this path
      sk_i32* jr = words.data();
      const SkIdx one{0, 0, 0, 0, 1, 1, 1, 1};
      kan_nonfinite_scan_body<T>(one, p, c.sw, c.sc, jr, jr + 2 * int64_t(p.out) * p.in);
      kan_nonfinite_fix_body<T>(one, p, c.x, c.grid, jr, jr + 2 * int64_t(p.out) * p.in, y);
    }
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

inline namespace SK_VEC_ABI {
void register_kan(Registry& r) {
  r.add<KanUnpackArgs>("kan_unpack", Backend::cpu, &unpack);
  r.add<KanLinearArgs>("kan_linear", Backend::cpu, &forward);
  r.add<KanLinearBackwardArgs>("kan_linear_backward", Backend::cpu, &kan_linear_backward);
}
}  // inline namespace SK_VEC_ABI

}  // namespace swisk::cpu
