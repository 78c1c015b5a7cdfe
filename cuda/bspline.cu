// CUDA entry points and launches of the B-spline expansion kernels (bodies: swisk/kernels/bspline_tiled.h).
#include "launch.h"
#include "dtype_dispatch.h"
#include "swisk/ops/bspline.h"

namespace swisk::SWISK_CUDA_NS {

// The expansion's order-3 bucket: at most 48 registers, five blocks of 256 per SM (62.5 % occupancy, no
// spills on sm_90a; 48-51 registers and four blocks without the bound). The contraction (55 registers)
// and the larger buckets keep theirs: bounded, the contraction's fp16/bf16 bodies spill.
constexpr int bspline_min_blocks(int m) { return m == 3 ? 5 : 1; }

template <sk_i32 M, typename T>
__global__ void __launch_bounds__(SWISK_STRIDE_THREADS, bspline_min_blocks(M))
    bspline_expand_kernel(BsplineParams p, const T* x, const T* grid, T* out) {
  SWISK_SHARED(typename sk_acc<T>::type, stage, SWISK_BSPLINE_STAGE);
  bspline_expand_staged_body<M, T>(cuda_idx(), p, x, grid, out, stage);
}

template <sk_i32 M, typename T>
__global__ void bspline_contract_kernel(BsplineParams p, const T* x, const T* grid, const T* g, T* gx) {
  SWISK_SHARED(typename sk_acc<T>::type, stage, SWISK_BSPLINE_STAGE);
  bspline_contract_staged_body<M, T>(cuda_idx(), p, x, grid, g, gx, stage);
}

// f(std::integral_constant<int, M>) for the order's register bucket (bspline_gpu_bucket).
template <class F>
void dispatch_bucket(const BsplineParams& p, F&& f) {
  switch (bspline_gpu_bucket(p.order)) {
    case 3: return f(std::integral_constant<int, 3>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, 15>{});
  }
}

static void expand(const BsplineBasisArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order, a.derivative, a.base);
  const dim3 grid = to_dim3(bspline_expand_grid(p)), block(SWISK_STRIDE_THREADS);
  const DeviceGuard guard("bspline_expand", a.x);
  dispatch_float<false>(a.x.dtype, "bspline_expand", [&](auto tag) {
    using T = decltype(tag);
    dispatch_bucket(p, [&](auto m) {
      const auto expand_kernel = bspline_expand_kernel<m(), T>;
      SWISK_LAUNCH(expand_kernel, grid, block, a.launch.stream, p, a.x.ptr<const T>(),
                   a.grid.ptr<const T>(), a.out.ptr<T>());
    });
  });
}

static void contract(const BsplineContractArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order, a.derivative, a.base);
  const dim3 grid = to_dim3(bspline_contract_grid(p)), block(SWISK_STRIDE_THREADS);
  const DeviceGuard guard("bspline_contract", a.x);
  dispatch_float<false>(a.x.dtype, "bspline_contract", [&](auto tag) {
    using T = decltype(tag);
    dispatch_bucket(p, [&](auto m) {
      const auto contract_kernel = bspline_contract_kernel<m(), T>;
      SWISK_LAUNCH(contract_kernel, grid, block, a.launch.stream, p, a.x.ptr<const T>(),
                   a.grid.ptr<const T>(), a.grad.ptr<const T>(), a.grad_x.ptr<T>());
    });
  });
}

void register_bspline(Registry& r, Backend b) {
  r.add<BsplineBasisArgs>("bspline_expand", b, &expand, &gpu_float_only<BsplineBasisArgs>);
  r.add<BsplineContractArgs>("bspline_contract", b, &contract, &gpu_float_only<BsplineContractArgs>);
}

}  // namespace swisk::SWISK_CUDA_NS
