// CUDA entry point and launch of the sketch generation kernel (body: swisk/kernels/sketch.h): a
// grid-stride loop over the tile's entries (dense kinds) or columns (sparse-sign, whose chosen rows
// sit in shared memory).
#include <vector>

#include "launch.h"
#include "dtype_dispatch.h"
#include "swisk/ops/sketch.h"

namespace swisk::SWISK_CUDA_NS {

template <int K, typename T>
__global__ void sketch_matrix_kernel(SketchParams p, T* out) {
  SWISK_SHARED(sk_u32, taken, SWISK_SKETCH_SHARED(K));
  sketch_matrix_body<K, T>(cuda_idx(), p, out, taken);
}

template <typename T>
__global__ void fwht_shared_kernel(FwhtParams p, const T* x, T* out) {
  SWISK_SHARED(float, buf, SWISK_FWHT_CHUNK);
  fwht_shared_body<T>(cuda_idx(), p, x, out, buf);
}

template <typename T>
__global__ void fwht_stage_kernel(FwhtParams p, T* out) {
  fwht_stage_body<T>(cuda_idx(), p, out);
}

// The shared pass, then one launch per global stage, in order on the caller's stream.
static void fwht(const FwhtArgs& a) {
  const std::vector<FwhtParams> passes = fwht_passes(a);
  if (fwht_chunks(passes[0]) == 0) return;
  const DeviceGuard guard("fwht", a.x);
  dispatch_float<false>(a.x.dtype, "fwht", [&](auto tag) {
    using T = decltype(tag);
    auto* fwht_shared = &fwht_shared_kernel<T>;
    auto* fwht_stage = &fwht_stage_kernel<T>;
    SWISK_LAUNCH(fwht_shared, to_dim3(fwht_shared_grid(passes[0])), dim3(SWISK_FWHT_THREADS), a.launch.stream,
                 passes[0], a.x.ptr<const T>(), a.out.ptr<T>());
    for (size_t s = 1; s < passes.size(); ++s)
      SWISK_LAUNCH(fwht_stage, to_dim3(fwht_stage_grid(passes[s])), dim3(SWISK_FWHT_THREADS), a.launch.stream,
                   passes[s], a.out.ptr<T>());
  });
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
  r.add<FwhtArgs>("fwht", b, &fwht, &gpu_float_only<FwhtArgs>);
}

}  // namespace swisk::SWISK_CUDA_NS
