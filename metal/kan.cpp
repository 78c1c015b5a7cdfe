// Metal launch plans of the fused KAN linear kernels (metal/kan.metal).
#include "plan.h"
#include "swisk/ops/kan.h"

namespace swisk::metal {

constexpr uint32_t kTile = SWISK_KAN_TILE;

static void forward(const KanLinearArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  if (p.rows == 0 || p.out == 0) return;
  // one dispatch: the kernel reads every weight and makes the formulation's 0·inf itself (kernels/kan.h)
  submit(a.launch, make_plan(a, "kan_forward", p, kan_forward_grid(p), kTile, kTile,
                             {&a.x, &a.grid, &a.base_weight, &a.spline_weight, &a.spline_scaler, &a.out}));
}

static void backward(const KanLinearBackwardArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  if (p.out == 0 || p.in == 0) return;
  if (p.rows > 0 && a.need_x)
    submit(a.launch, make_plan(a, "kan_backward_x", p, kan_backward_x_grid(p), kTile, kTile,
                               {&a.x, &a.grid, &a.base_weight, &a.spline_weight, &a.spline_scaler, &a.grad_out,
                                &a.grad_x}));
  if (!a.need_weights) return;
  submit(a.launch, make_plan(a, "kan_backward_w", p, kan_backward_w_grid(p), kTile, kTile,
                             {&a.x, &a.grid, &a.grad_out, &a.grad_base_weight, &a.work}));
  submit(a.launch, make_plan(a, "kan_backward_scale", p, kan_backward_scale_grid(p), SWISK_STRIDE_THREADS, 1,
                               {&a.spline_weight, &a.spline_scaler, &a.work, &a.grad_spline_weight,
                                &a.grad_spline_scaler}));
}

void register_kan(Registry& r, Backend b) {
  r.add<KanLinearArgs>("kan_linear", b, &forward, &gpu_float_only<KanLinearArgs>);
  r.add<KanLinearBackwardArgs>("kan_linear_backward", b, &backward, &gpu_float_only<KanLinearBackwardArgs>);
}

}  // namespace swisk::metal
