// CUDA entry points and launches of the B-spline basis kernels (bodies: swisk/kernels/bspline.h).
#include "launch.h"
#include "dtype_dispatch.h"
#include "swisk/ops/bspline.h"

namespace swisk::SWISK_CUDA_NS {

template <typename T>
__global__ void bspline_basis_kernel(BsplineParams p, const T* x, const T* grid, T* out) {
  bspline_basis_body<T>(cuda_idx(), p, x, grid, out);
}

template <typename T>
__global__ void bspline_basis_backward_kernel(BsplineParams p, const T* x, const T* grid, const T* go, T* gx) {
  bspline_basis_backward_body<T>(cuda_idx(), p, x, grid, go, gx);
}

static void basis(const BsplineBasisArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order);
  const dim3 grid = to_dim3(bspline_basis_grid(p)), block(SWISK_STRIDE_THREADS);
  const DeviceGuard guard("bspline_basis", a.x);
  dispatch_float<false>(a.x.dtype, "bspline_basis", [&](auto tag) {
    using T = decltype(tag);
    SWISK_LAUNCH(bspline_basis_kernel<T>, grid, block, a.launch.stream, p, a.x.ptr<const T>(), a.grid.ptr<const T>(),
                 a.out.ptr<T>());
  });
}

static void basis_backward(const BsplineBasisBackwardArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order);
  const dim3 grid = to_dim3(bspline_basis_grid(p)), block(SWISK_STRIDE_THREADS);
  const DeviceGuard guard("bspline_basis_backward", a.x);
  dispatch_float<false>(a.x.dtype, "bspline_basis_backward", [&](auto tag) {
    using T = decltype(tag);
    SWISK_LAUNCH(bspline_basis_backward_kernel<T>, grid, block, a.launch.stream, p, a.x.ptr<const T>(),
                 a.grid.ptr<const T>(), a.grad_out.ptr<const T>(), a.grad_x.ptr<T>());
  });
}

void register_bspline(Registry& r, Backend b) {
  r.add<BsplineBasisArgs>("bspline_basis", b, &basis, &gpu_float_only<BsplineBasisArgs>);
  r.add<BsplineBasisBackwardArgs>("bspline_basis_backward", b, &basis_backward,
                                  &gpu_float_only<BsplineBasisBackwardArgs>);
}

}  // namespace swisk::SWISK_CUDA_NS
