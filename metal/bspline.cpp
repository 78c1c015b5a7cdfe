// Metal launch plans of the B-spline expansion kernels (metal/bspline.metal).
#include <string>

#include "plan.h"
#include "swisk/ops/bspline.h"

namespace swisk::metal {

// "bspline_expand_m3" etc.: the kernel family of the order's register bucket.
static std::string family(const char* name, const BsplineParams& p) {
  return std::string(name) + "_m" + std::to_string(bspline_gpu_bucket(p.order));
}

static void expand(const BsplineBasisArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order, a.derivative, a.base);
  submit(a.launch, make_plan(a, family("bspline_expand", p).c_str(), p, bspline_expand_grid(p), SWISK_STRIDE_THREADS,
                             1, {&a.x, &a.grid, &a.out}));
}

static void contract(const BsplineContractArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order, a.derivative, a.base);
  submit(a.launch, make_plan(a, family("bspline_contract", p).c_str(), p, bspline_contract_grid(p),
                             SWISK_STRIDE_THREADS, 1, {&a.x, &a.grid, &a.grad, &a.grad_x}));
}

void register_bspline(Registry& r, Backend b) {
  r.add<BsplineBasisArgs>("bspline_expand", b, &expand, &gpu_float_only<BsplineBasisArgs>);
  r.add<BsplineContractArgs>("bspline_contract", b, &contract, &gpu_float_only<BsplineContractArgs>);
}

}  // namespace swisk::metal
