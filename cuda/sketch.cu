// CUDA entry point and launch of the sketch generation kernel (body: swisk/kernels/sketch.h): a
// grid-stride loop over the tile's entries (dense kinds) or columns (sparse-sign, whose chosen rows
// sit in shared memory).
#include "launch.h"
#include "dtype_dispatch.h"
#include "swisk/ops/sketch.h"

namespace swisk::SWISK_CUDA_NS {

template <int K, typename T>
__global__ void sketch_matrix_kernel(SketchParams p, T* out) {
  SWISK_SHARED(sk_u32, taken, SWISK_SKETCH_SHARED(K));
  sketch_matrix_body<K, T>(cuda_idx(), p, out, taken);
}

static void generate(const SketchMatrixArgs& a) {
  const SketchParams p = sketch_params(a);
  if (sketch_items(p) == 0) return;
  const DeviceGuard guard("sketch_matrix", a.x);
  dispatch_float<false>(a.x.dtype, "sketch_matrix", [&](auto tag) {
    using T = decltype(tag);
    dispatch_sketch(p.kind, [&](auto k) {
      auto* sketch_matrix = &sketch_matrix_kernel<decltype(k)::value, T>;  // a comma-free macro argument
      SWISK_LAUNCH(sketch_matrix, to_dim3(sketch_grid(p)), dim3(SWISK_SKETCH_THREADS), a.launch.stream, p,
                   a.out.ptr<T>());
    });
  });
}

void register_sketch(Registry& r, Backend b) {
  r.add<SketchMatrixArgs>("sketch_matrix", b, &generate, &gpu_float_only<SketchMatrixArgs>);
}

}  // namespace swisk::SWISK_CUDA_NS
