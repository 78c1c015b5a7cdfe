// CPU wavelet KAN. The inputs are packed once into the accumulator type with rows padded to the lane
// count; the hot loops run over lanes of features and vectorise (AVX-512 and AVX2+FMA clones and a baseline one).
// Forward: blocks of (rows x out), each output reduced over lanes then across them in a fixed order.
// Backward, one pass: a task (L input features x a chunk of out) owns the parameter gradients it
// touches (reduced over the batch) and a partial dx (reduced over its outputs); the partials are
// added in a fixed order, so nothing is shared between threads and results are deterministic.
// The vector sin/cos reduce exactly only up to sincos_fast_max; a block whose |t| may pass that (bounded
// from per-row and per-output maxima found while packing) runs the scalar CpuVecMathExact instead.
#include "swisk/ops/wavelet.h"

#include <algorithm>
#include <vector>

#include "dtype_dispatch.h"
#include "clones.h"
#include "parallel.h"
#include "vec_math.h"

namespace swisk::cpu {

template <typename A>
constexpr int lanes() {
  return sizeof(A) == 4 ? 16 : 8;
}

// Padded lanes hold x = 0, translation = 0, 1/scale = 1, weight = 0: they add exactly 0.
template <typename A>
struct Packed {
  int64_t rows = 0, in = 0, out = 0, ld = 0;  // ld: in rounded up to the lane count
  std::vector<A> x, tr, rc, w;
  // bounds of |t| = |x - tr| |rc| <= xmax[n] rmax[o] + trmax[o] (forward), xcol[i] |rc| + |tr rc| (backward)
  std::vector<A> xmax, xcol, rmax, trmax;
};

// |t| beyond which wavelet K needs the exact sin/cos. Morlet's cos(5t) is multiplied by e^(-t^2/2),
// exactly 0 past |t| = 13.2, so bounded values suffice there; the others use no sin/cos of t.
template <int K, typename A>
constexpr A far_t() {
  return K == SK_WAV_shannon ? VecTraits<A>::sincos_fast_max : A(__builtin_inf());
}

// Grain of the copying loops (packing, transposes, sums) over items of `len` values: threads join in
// only past ~64K values, below which a parallel region costs more than it saves.
static int64_t copy_grain(int64_t len) {
  return std::max<int64_t>(16, (int64_t(1) << 16) / std::max<int64_t>(len, 1));
}

template <typename A>
SK_VEC_INLINE A vabs(A v) {
  return v < A(0) ? -v : v;
}

// max(m, |v[i]|) over i < n, in L running maxima (vectorises; max is exact, so the order is moot).
template <typename A, int L>
SK_VEC_INLINE A absmax(const A* __restrict v, int64_t n, A m) {
  A part[L];
  for (int l = 0; l < L; ++l) part[l] = m;
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l) part[l] = std::max(part[l], vabs(v[i + l]));
  for (; i < n; ++i) m = std::max(m, vabs(v[i]));
  for (int l = 0; l < L; ++l) m = std::max(m, part[l]);
  return m;
}

// A row of x converted to A; returns its max |x|.
template <typename T, typename A>
SK_CLONES A pack_x_row(const T* __restrict src, A* __restrict dst, int64_t in) {
  for (int64_t i = 0; i < in; ++i) dst[i] = A(float_of(src[i]));
  return absmax<A, lanes<A>()>(dst, in, A(0));
}

// An output's parameters: translation, 1/scale, weight, and the maxima of |1/scale| and |translation/scale|.
template <typename T, typename A>
SK_CLONES void pack_params_row(const T* __restrict ts, const T* __restrict ss, const T* __restrict ws,
                               A* __restrict tr, A* __restrict rc, A* __restrict w, A* __restrict trc, int64_t in,
                               A* rmax, A* trmax) {
  for (int64_t i = 0; i < in; ++i) {
    tr[i] = A(float_of(ts[i]));
    rc[i] = A(1) / A(float_of(ss[i]));
    w[i] = A(float_of(ws[i]));
    trc[i] = tr[i] * rc[i];
  }
  *rmax = absmax<A, lanes<A>()>(rc, in, A(0));
  *trmax = absmax<A, lanes<A>()>(trc, in, A(0));
}

template <typename T, typename A>
static Packed<A> pack(const TensorView& x, const TensorView& scale, const TensorView& trans, const TensorView& weight,
                      const WaveletParams& p) {
  constexpr int L = lanes<A>();
  Packed<A> P;
  P.rows = p.rows, P.in = p.in, P.out = p.out;
  P.ld = std::max<int64_t>(L, (P.in + L - 1) / L * L);
  P.x.assign(P.rows * P.ld, A(0));
  P.tr.assign(P.out * P.ld, A(0));
  P.rc.assign(P.out * P.ld, A(1));
  P.w.assign(P.out * P.ld, A(0));
  const T *xs = x.ptr<const T>(), *ss = scale.ptr<const T>(), *ts = trans.ptr<const T>(), *ws = weight.ptr<const T>();
  P.xmax.assign(P.rows, A(0));
  P.rmax.assign(P.out, A(0));
  P.trmax.assign(P.out, A(0));
  parallel_for(P.rows, copy_grain(P.in), [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) P.xmax[n] = pack_x_row<T, A>(xs + n * P.in, &P.x[n * P.ld], P.in);
  });
  P.xcol.assign(P.ld, A(0));
  for (int64_t n = 0; n < P.rows; ++n) {
    A* __restrict col = P.xcol.data();
    const A* __restrict row = &P.x[n * P.ld];
    for (int64_t i = 0; i < P.ld; ++i) col[i] = std::max(col[i], vabs(row[i]));  // padding adds |0|
  }
  parallel_for(P.out, copy_grain(P.in), [&](int64_t lo, int64_t hi) {
    std::vector<A> trc(P.in);
    for (int64_t o = lo; o < hi; ++o)
      pack_params_row<T, A>(ts + o * P.in, ss + o * P.in, ws + o * P.in, &P.tr[o * P.ld], &P.rc[o * P.ld],
                            &P.w[o * P.ld], trc.data(), P.in, &P.rmax[o], &P.trmax[o]);
  });
  return P;
}

// Lane accumulators summed pairwise, always in the same order.
template <typename A, int L>
SK_VEC_INLINE A lane_sum(const A* acc) {
  A v[L];
  for (int l = 0; l < L; ++l) v[l] = acc[l];
  for (int h = L / 2; h > 0; h /= 2)
    for (int l = 0; l < h; ++l) v[l] += v[l + h];
  return v[0];
}

// sum_i w psi(t) over one row of x and one output's parameters.
template <int K, class M, typename A>
SK_VEC_INLINE A fwd_dot(const A* x, const A* tr, const A* rc, const A* w, int64_t ld) {
  constexpr int L = lanes<A>();
  A acc[L] = {};
  for (int64_t i = 0; i < ld; i += L)
    for (int l = 0; l < L; ++l) {  // lanes of fwd_block: must vectorise (tests/test_cpu_vectorize.py)
      const A t = (x[i + l] - tr[i + l]) * rc[i + l];
      acc[l] += w[i + l] * wavelet_eval<K, false, M>(t).v;
    }
  return lane_sum<A, L>(acc);
}

// y[n, o] for n in [n0, n1), o in [o0, o1).
template <int K, typename T, typename A>
SK_CLONES void fwd_block(const Packed<A>& P, T* y, int64_t n0, int64_t n1, int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    const A *tr = &P.tr[o * P.ld], *rc = &P.rc[o * P.ld], *w = &P.w[o * P.ld];
    for (int64_t n = n0; n < n1; ++n) {
      const A* x = &P.x[n * P.ld];
      const bool far = P.xmax[n] * P.rmax[o] + P.trmax[o] > far_t<K, A>();
      const A v = far ? fwd_dot<K, CpuVecMathExact>(x, tr, rc, w, P.ld) : fwd_dot<K, CpuVecMath>(x, tr, rc, w, P.ld);
      y[n * P.out + o] = T(v);
    }
  }
}

// The batch loop of bwd_block for one output: a1 += g psi, a2 += g psi', a3 += g psi' t, dx += g psi' w / s.
template <int K, class M, typename A>
SK_VEC_INLINE void bwd_rows(const Packed<A>& P, const A* g, A* dxa, int64_t i0, const A* tr, const A* rc, const A* wr,
                            A* a1, A* a2, A* a3) {
  constexpr int L = lanes<A>();
  for (int64_t n = 0; n < P.rows; ++n) {
    const A gn = g[n];
    const A* __restrict x = &P.x[n * P.ld + i0];
    A* __restrict d = dxa + n * L;
    for (int l = 0; l < L; ++l) {  // lanes of bwd_block: must vectorise (tests/test_cpu_vectorize.py)
      const A t = (x[l] - tr[l]) * rc[l];
      const WavVal<A> v = wavelet_eval<K, true, M>(t);
      const A gd = gn * v.d;
      a1[l] += gn * v.v;
      a2[l] += gd;
      a3[l] += gd * t;
      d[l] += gd * wr[l];
    }
  }
}

// The gradients of features [i0, i0 + L) over outputs [o0, o1): the parameter gradients of those
// (o, i), and into dxa (rows, L) the part of dx that sums over these outputs. gT is grad_out
// transposed (out, rows).
template <int K, typename T, typename A>
SK_CLONES void bwd_block(const Packed<A>& P, const A* gT, A* dxa, int64_t i0, int64_t o0, int64_t o1, T* dscale,
                         T* dtrans, T* dweight) {
  constexpr int L = lanes<A>();
  std::fill(dxa, dxa + P.rows * L, A(0));
  for (int64_t o = o0; o < o1; ++o) {
    A tr[L], rc[L], wr[L], a1[L] = {}, a2[L] = {}, a3[L] = {};
    for (int l = 0; l < L; ++l) {
      tr[l] = P.tr[o * P.ld + i0 + l];
      rc[l] = P.rc[o * P.ld + i0 + l];
      wr[l] = P.w[o * P.ld + i0 + l] * rc[l];
    }
    A bound = 0;
    for (int l = 0; l < L; ++l) bound = std::max(bound, P.xcol[i0 + l] * vabs(rc[l]) + vabs(tr[l] * rc[l]));
    const A* g = gT + o * P.rows;
    if (bound > far_t<K, A>())
      bwd_rows<K, CpuVecMathExact>(P, g, dxa, i0, tr, rc, wr, a1, a2, a3);
    else
      bwd_rows<K, CpuVecMath>(P, g, dxa, i0, tr, rc, wr, a1, a2, a3);
    for (int l = 0; l < L && i0 + l < P.in; ++l) {
      const int64_t e = o * P.in + i0 + l;
      dweight[e] = T(a1[l]);
      dtrans[e] = T(-wr[l] * a2[l]);
      dscale[e] = T(-wr[l] * a3[l]);
    }
  }
}

// Chunks of out in the backward: 1 when there are enough feature blocks to share out, else enough
// to make ~16 tasks. A function of the shape only, so results do not depend on the thread count.
static int64_t out_chunks(int64_t feature_blocks, int64_t out) {
  if (feature_blocks >= 16) return 1;
  return std::max<int64_t>(1, std::min<int64_t>((16 + feature_blocks - 1) / feature_blocks, out / 32));
}

static void forward(const WaveletKanArgs& a) {
  const WaveletParams p = wavelet_params(a.x, a.weight, a.wavelet);
  dispatch_float<true>(a.x.dtype, "wavelet_kan", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const Packed<A> P = pack<T, A>(a.x, a.scale, a.translation, a.weight, p);
    constexpr int64_t NB = 16, OB = 16;
    const int64_t nb = (P.rows + NB - 1) / NB, ob = (P.out + OB - 1) / OB;
    T* y = a.out.ptr<T>();
    dispatch_wavelet(p.wavelet, [&](auto k) {
      parallel_for(nb * ob, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t b = lo; b < hi; ++b) {
          const int64_t n0 = b / ob * NB, o0 = b % ob * OB;
          fwd_block<decltype(k)::value, T, A>(P, y, n0, std::min(n0 + NB, P.rows), o0, std::min(o0 + OB, P.out));
        }
      });
    });
  });
}

static void backward(const WaveletKanBackwardArgs& a) {
  const WaveletParams p = wavelet_params(a.x, a.weight, a.wavelet);
  dispatch_float<true>(a.x.dtype, "wavelet_kan_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    constexpr int L = lanes<A>();
    const Packed<A> P = pack<T, A>(a.x, a.scale, a.translation, a.weight, p);
    std::vector<A> gT(P.out * P.rows);
    const T* g = a.grad_out.ptr<const T>();
    parallel_for(P.out, copy_grain(P.rows), [&](int64_t lo, int64_t hi) {
      for (int64_t o = lo; o < hi; ++o)
        for (int64_t n = 0; n < P.rows; ++n) gT[o * P.rows + n] = A(float_of(g[n * P.out + o]));
    });
    const int64_t blocks = P.ld / L, chunks = out_chunks(blocks, P.out);
    // dx partial sums per chunk of out, (chunks, rows, ld), added in chunk order below
    std::vector<A> part(chunks * P.rows * P.ld);
    dispatch_wavelet(p.wavelet, [&](auto k) {
      parallel_for(blocks * chunks, 1, [&](int64_t lo, int64_t hi) {
        std::vector<A> dxa(P.rows * L);
        for (int64_t task = lo; task < hi; ++task) {
          const int64_t b = task / chunks, c = task % chunks;
          const int64_t o0 = P.out * c / chunks, o1 = P.out * (c + 1) / chunks;
          bwd_block<decltype(k)::value, T, A>(P, gT.data(), dxa.data(), b * L, o0, o1, a.grad_scale.ptr<T>(),
                                              a.grad_translation.ptr<T>(), a.grad_weight.ptr<T>());
          A* dst = part.data() + c * P.rows * P.ld + b * L;
          for (int64_t n = 0; n < P.rows; ++n) std::copy(&dxa[n * L], &dxa[n * L] + L, dst + n * P.ld);
        }
      });
    });
    T* dx = a.grad_x.ptr<T>();
    parallel_for(P.rows, copy_grain(P.in * chunks), [&](int64_t lo, int64_t hi) {
      for (int64_t n = lo; n < hi; ++n)
        for (int64_t i = 0; i < P.in; ++i) {
          A acc = part[n * P.ld + i];
          for (int64_t c = 1; c < chunks; ++c) acc += part[(c * P.rows + n) * P.ld + i];
          dx[n * P.in + i] = T(acc);
        }
    });
  });
}

void register_wavelet(Registry& r) {
  r.add<WaveletKanArgs>("wavelet_kan", Backend::cpu, &forward);
  r.add<WaveletKanBackwardArgs>("wavelet_kan_backward", Backend::cpu, &backward);
}

}  // namespace swisk::cpu
