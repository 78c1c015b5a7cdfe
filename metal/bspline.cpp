// Metal launch plans of the B-spline basis kernels (metal/bspline.metal).
#include "plan.h"
#include "swisk/ops/bspline.h"

namespace swisk::metal {

static void basis(const BsplineBasisArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order);
  submit(a.launch, make_plan(a, "bspline_basis", p, bspline_basis_grid(p), SWISK_STRIDE_THREADS, 1,
                             {&a.x, &a.grid, &a.out}));
}

static void basis_backward(const BsplineBasisBackwardArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order);
  submit(a.launch, make_plan(a, "bspline_basis_backward", p, bspline_basis_grid(p), SWISK_STRIDE_THREADS, 1,
                             {&a.x, &a.grid, &a.grad_out, &a.grad_x}));
}

void register_bspline(Registry& r, Backend b) {
  r.add<BsplineBasisArgs>("bspline_basis", b, &basis, &gpu_float_only<BsplineBasisArgs>);
  r.add<BsplineBasisBackwardArgs>("bspline_basis_backward", b, &basis_backward,
                                  &gpu_float_only<BsplineBasisBackwardArgs>);
}

}  // namespace swisk::metal
