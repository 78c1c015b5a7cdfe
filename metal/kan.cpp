// Metal launch plans of the fused KAN linear kernels (metal/kan.metal).
#include "plan.h"
#include "swisk/ops/kan.h"

namespace swisk::metal {

constexpr uint32_t kTile = SWISK_KAN_TILE;

static uint32_t tiles(unsigned long long n, uint32_t cap) {
  const unsigned long long t = (n + kTile - 1) / kTile;
  return uint32_t(t == 0 ? 1 : (t > cap ? cap : t));
}

// A TILE x TILE threadgroup plan over (gx, gy) threadgroups.
template <class Args>
MetalDispatch tile_plan(const Args& a, const char* family, const KanParams& p, uint32_t gx, uint32_t gy,
                        std::initializer_list<const TensorView*> tensors) {
  MetalDispatch plan = make_plan(a, family, p, gx, kTile, tensors);
  plan.grid[1] = gy;
  plan.threadgroup[1] = kTile;
  return plan;
}

static void forward(const KanLinearArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  if (p.rows == 0 || p.out == 0) return;
  submit(a.launch, tile_plan(a, "kan_forward", p, tiles(p.rows, 1u << 20), tiles(p.out, 1u << 20),
                             {&a.x, &a.grid, &a.base_weight, &a.spline_weight, &a.spline_scaler, &a.out}));
}

static void backward(const KanLinearBackwardArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  if (p.out == 0 || p.in == 0) return;
  if (p.rows > 0)
    submit(a.launch, tile_plan(a, "kan_backward_x", p, tiles(p.in, 1u << 20), tiles(p.rows, 1u << 20),
                               {&a.x, &a.grid, &a.base_weight, &a.spline_weight, &a.spline_scaler, &a.grad_out,
                                &a.grad_x}));
  submit(a.launch, tile_plan(a, "kan_backward_w", p, tiles(1ull * p.in * (p.n_basis + 1), 1u << 30),
                               tiles(p.out, 1u << 20), {&a.x, &a.grid, &a.grad_out, &a.grad_base_weight, &a.work}));
  submit(a.launch, make_plan(a, "kan_backward_scale", p, grid_stride_blocks(1ull * p.out * p.in, 256), 256,
                               {&a.spline_weight, &a.spline_scaler, &a.work, &a.grad_spline_weight,
                                &a.grad_spline_scaler}));
}

void register_kan(Registry& r, Backend b) {
  r.add<KanLinearArgs>("kan_linear", b, &forward, &gpu_float_only<KanLinearArgs>);
  r.add<KanLinearBackwardArgs>("kan_linear_backward", b, &backward, &gpu_float_only<KanLinearBackwardArgs>);
}

}  // namespace swisk::metal
