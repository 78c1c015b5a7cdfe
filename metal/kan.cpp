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
template <class Params>
MetalPlan tile_plan(const char* family, DType d, const Params& p, uint32_t gx, uint32_t gy,
                    std::initializer_list<const TensorView*> tensors) {
  MetalPlan plan = make_plan(family, d, p, gx, kTile, tensors);
  plan.grid[1] = gy;
  plan.threadgroup[1] = kTile;
  return plan;
}

static void forward(const KanLinearArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  if (p.rows == 0 || p.out == 0) return;
  submit(a.launch, tile_plan("kan_forward", a.x.dtype, p, tiles(p.rows, 1u << 20), tiles(p.out, 1u << 20),
                             {&a.x, &a.grid, &a.base_weight, &a.spline_weight, &a.spline_scaler, &a.out}));
}

static void backward(const KanLinearBackwardArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  // One plan per call on Metal: Python asks for the stages 0, 1, 2 in turn (stage -1: all, emulator only).
  SWISK_CHECK(a.stage >= 0 || a.launch.backend == Backend::metal_emu, value, "kan_linear_backward", "stage",
              "Metal runs one stage (0, 1 or 2) per call");
  const auto want = [&](int s) { return a.stage < 0 || a.stage == s; };
  if (p.out == 0 || p.in == 0) return;
  if (want(0) && p.rows > 0)
    submit(a.launch, tile_plan("kan_backward_x", a.x.dtype, p, tiles(p.in, 1u << 20), tiles(p.rows, 1u << 20),
                               {&a.x, &a.grid, &a.base_weight, &a.spline_weight, &a.spline_scaler, &a.grad_out,
                                &a.grad_x}));
  if (want(1))
    submit(a.launch, tile_plan("kan_backward_w", a.x.dtype, p, tiles(1ull * p.in * (p.n_basis + 1), 1u << 30),
                               tiles(p.out, 1u << 20), {&a.x, &a.grid, &a.grad_out, &a.grad_base_weight, &a.work}));
  if (want(2))
    submit(a.launch, make_plan("kan_backward_scale", a.x.dtype, p, grid_stride_blocks(1ull * p.out * p.in, 256), 256,
                               {&a.spline_weight, &a.spline_scaler, &a.work, &a.grad_spline_weight,
                                &a.grad_spline_scaler}));
}

void register_kan(Registry& r, Backend b) {
  r.add<KanLinearArgs>("kan_linear", b, &forward, &gpu_float_only<KanLinearArgs>);
  r.add<KanLinearBackwardArgs>("kan_linear_backward", b, &backward, &gpu_float_only<KanLinearBackwardArgs>);
}

}  // namespace swisk::metal
