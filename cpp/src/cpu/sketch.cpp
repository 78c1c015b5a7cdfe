// CPU sketch generation: the kernel header's entry functions over rows (dense kinds) or columns
// (sparse-sign). Every value is a pure function of (seed, row, column), so the result does not depend
// on the thread count. fp64 tiles hold the fp32 values widened exactly (the same operator in every dtype).
// Dense rows go in blocks of columns: Philox's words in a vectorised integer loop (an AVX2 clone),
// then the entries from them with the header's fp32 math.
#include "swisk/ops/sketch.h"

#include <algorithm>
#include <vector>

#include "dtype_dispatch.h"
#include "parallel.h"

namespace swisk::cpu {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && !defined(SWISK_SANITIZE)
// ISA levels, not "arch=haswell": GCC dispatches an arch= clone on the CPU model, so AMD got the baseline.
#define SK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SK_CLONES
#endif

constexpr sk_u32 kBlock = 256;

// The first two words of the draws of columns c .. c + nb of `row` (integer math only).
SK_CLONES static void draw_block(const SketchParams& p, sk_u32 row, sk_u32 c, sk_u32 nb, sk_u32* w0, sk_u32* w1) {
  for (sk_u32 j = 0; j < nb; ++j) {
    const SkU4 r = sk_sketch_draw(p, c + j, row);
    w0[j] = r.x;
    w1[j] = r.y;
  }
}

template <int K, typename T>
static void dense_rows(const SketchParams& p, int64_t lo, int64_t hi, T* out) {
  sk_u32 w0[kBlock], w1[kBlock];
  for (int64_t r = lo; r < hi; ++r) {
    T* dst = out + r * int64_t(p.cols);
    for (sk_u32 c = 0; c < p.cols; c += kBlock) {
      const sk_u32 nb = std::min(kBlock, p.cols - c);
      draw_block(p, p.r0 + sk_u32(r), p.c0 + c, nb, w0, w1);
      for (sk_u32 j = 0; j < nb; ++j) dst[c + j] = T(sketch_dense_value<K>(p, w0[j], w1[j]));
    }
  }
}

static void generate(const SketchMatrixArgs& a) {
  const SketchParams p = sketch_params(a);
  if (p.rows == 0 || p.cols == 0) return;
  dispatch_float<true>(a.x.dtype, "sketch_matrix", [&](auto tag) {
    using T = decltype(tag);
    T* out = a.out.ptr<T>();
    dispatch_sketch(p.kind, [&](auto kind) {
      constexpr int K = decltype(kind)::value;
      if constexpr (K == SK_SKETCH_sparse_sign) {
        parallel_for(p.cols, 256, [&](int64_t lo, int64_t hi) {
          sk_u32 taken[SWISK_SKETCH_MAX_NNZ];
          for (int64_t c = lo; c < hi; ++c) sketch_sparse_column<T>(p, p.c0 + sk_u32(c), out, taken, 1);
        });
      } else {
        const int64_t grain = p.cols >= 4096 ? 1 : (4096 + p.cols - 1) / p.cols;
        parallel_for(p.rows, grain, [&](int64_t lo, int64_t hi) { dense_rows<K, T>(p, lo, hi, out); });
      }
    });
  });
}

// FWHT of (rows, n): each row in the accumulator type A, butterflies, then the scale (x may be out).
template <typename T, typename A>
static void fwht_rows(const T* x, T* out, int64_t rows, int64_t n, A scale) {
  parallel_for(rows, std::max<int64_t>(1, 4096 / n), [&](int64_t lo, int64_t hi) {
    std::vector<A> buf(n);
    for (int64_t r = lo; r < hi; ++r) {
      for (int64_t i = 0; i < n; ++i) buf[i] = A(float_of(x[r * n + i]));
      for (int64_t h = 1; h < n; h <<= 1)
        for (int64_t i0 = 0; i0 < n; i0 += 2 * h)
          for (int64_t i = i0; i < i0 + h; ++i) {
            const A u = buf[i], v = buf[i + h];
            buf[i] = u + v;
            buf[i + h] = u - v;
          }
      for (int64_t i = 0; i < n; ++i) out[r * n + i] = T(buf[i] * scale);
    }
  });
}

static void fwht(const FwhtArgs& a) {
  const int64_t n = a.x.size(-1), rows = n ? a.x.numel() / n : 0;
  dispatch_float<true>(a.x.dtype, "fwht", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    fwht_rows<T, A>(a.x.ptr<const T>(), a.out.ptr<T>(), rows, n, A(a.scale));
  });
}

// SRHT (either direction): the in pass into the workspace (type A), its FWHT in place, the out pass.
static void srht(const SrhtArgs& a) {
  const SrhtParams p = srht_params(a);
  if (p.rows == 0) return;
  dispatch_float<true>(a.x.dtype, "srht", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const T* x = a.x.ptr<const T>();
    A* work = a.work.ptr<A>();
    T* out = a.out.ptr<T>();
    const int64_t wide = int64_t(p.rows) * p.big_n, narrow = int64_t(p.rows) * (a.transpose ? p.n : p.k);
    parallel_for(wide, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t e = lo; e < hi; ++e)
        a.transpose ? srht_t_in_at<T, A>(p, sk_u64(e), x, work) : srht_in_at<T, A>(p, sk_u64(e), x, work);
    });
    fwht_rows<A, A>(work, work, p.rows, p.big_n, A(1));
    parallel_for(narrow, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t e = lo; e < hi; ++e)
        a.transpose ? srht_t_out_at<T, A>(p, sk_u64(e), work, out) : srht_out_at<T, A>(p, sk_u64(e), work, out);
    });
  });
}

void register_sketch(Registry& r) {
  r.add<SketchMatrixArgs>("sketch_matrix", Backend::cpu, &generate);
  r.add<FwhtArgs>("fwht", Backend::cpu, &fwht);
  r.add<SrhtArgs>("srht", Backend::cpu, &srht);
  r.add<SrhtArgs>("srht_transpose", Backend::cpu, &srht);
}

}  // namespace swisk::cpu
