// CPU sketch generation: the kernel header's entry functions over rows (dense kinds) or columns
// (sparse-sign). Every value is a pure function of (seed, row, column), so the result does not depend
// on the thread count. fp64 tiles hold the fp32 values widened exactly (the same operator in every dtype).
// Dense rows go in blocks of columns: Philox's words in a vectorised integer loop (an AVX2 clone),
// then the entries from them with the header's fp32 math.
#include "swisk/ops/sketch.h"

#include <algorithm>

#include "dtype_dispatch.h"
#include "parallel.h"

namespace swisk::cpu {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && !defined(SWISK_SANITIZE)
#define SK_CLONES __attribute__((target_clones("arch=haswell", "default")))
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

void register_sketch(Registry& r) { r.add<SketchMatrixArgs>("sketch_matrix", Backend::cpu, &generate); }

}  // namespace swisk::cpu
