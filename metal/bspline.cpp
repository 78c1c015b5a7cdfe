// Metal launch plans of the B-spline basis kernels (metal/bspline.metal).
#include "plan.h"
#include "swisk/ops/bspline.h"

namespace swisk::metal {

constexpr uint32_t kThreads = 256;

static void basis(const BsplineBasisArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order);
  const uint32_t groups = grid_stride_blocks(1ull * p.rows * p.in, kThreads);
  submit(a.launch, make_plan(a, "bspline_basis", p, groups, kThreads, {&a.x, &a.grid, &a.out}));
}

static void basis_backward(const BsplineBasisBackwardArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order);
  const uint32_t groups = grid_stride_blocks(1ull * p.rows * p.in, kThreads);
  submit(a.launch, make_plan(a, "bspline_basis_backward", p, groups, kThreads,
                             {&a.x, &a.grid, &a.grad_out, &a.grad_x}));
}

void register_bspline(Registry& r, Backend b) {
  r.add<BsplineBasisArgs>("bspline_basis", b, &basis, &gpu_float_only<BsplineBasisArgs>);
  r.add<BsplineBasisBackwardArgs>("bspline_basis_backward", b, &basis_backward,
                                  &gpu_float_only<BsplineBasisBackwardArgs>);
}

}  // namespace swisk::metal
