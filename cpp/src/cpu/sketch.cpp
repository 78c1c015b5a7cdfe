// CPU sketch generation: the kernel header's entry functions over rows (dense kinds) or columns
// (sparse-sign). Every value is a pure function of (seed, row, column), so the result does not depend
// on the thread count. fp64 tiles hold the fp32 values widened exactly (the same operator in every dtype).
#include "swisk/ops/sketch.h"

#include "dtype_dispatch.h"
#include "parallel.h"

namespace swisk::cpu {

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
        parallel_for(p.rows, grain, [&](int64_t lo, int64_t hi) {
          for (int64_t r = lo; r < hi; ++r) {
            T* dst = out + r * int64_t(p.cols);
            for (sk_u32 c = 0; c < p.cols; ++c) dst[c] = T(sketch_dense_entry<K>(p, p.r0 + sk_u32(r), p.c0 + c));
          }
        });
      }
    });
  });
}

void register_sketch(Registry& r) { r.add<SketchMatrixArgs>("sketch_matrix", Backend::cpu, &generate); }

}  // namespace swisk::cpu
