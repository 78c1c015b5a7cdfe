// KAN convolution: validation and shapes of the GEMM route composed in Python (DESIGN.md, "GEMM-shaped
// work"): swisk's expansion kernel writes tiles of unfolded bases, the vendor GEMM multiplies them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "swisk/call.h"

namespace swisk {

// The scalar arguments: padding (before, after) per spatial dim; activation: one of kan_conv_activations().
struct KanConvGeometry {
  int order = 3;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  std::string activation = "silu";
};

// x (..., C, *S) with d = spatial dims (1 to 3, from spline_weight), grid (C, n_knots),
// base_weight (O, C/groups, *K) or empty, spline_weight (O, C/groups·n_basis, *K) holding channel
// c·n_basis + j, spline_scaler (O, C/groups, *K) or empty; out (..., O, *S_out).
struct KanConvArgs {
  TensorView x, grid, base_weight, spline_weight, spline_scaler, out;
  KanConvGeometry geo;
  Launch launch;
  static constexpr int kInputs = 5;
  static constexpr bool kWork = false;
  using A = KanConvArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::grid, &A::base_weight, &A::spline_weight,
                                                 &A::spline_scaler, &A::out};
};

// The same arguments with grad_out (the forward's output shape); gradients of x and the weights
// (empty when their argument is).
struct KanConvBackwardArgs {
  TensorView x, grid, base_weight, spline_weight, spline_scaler, grad_out;
  TensorView grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler;
  KanConvGeometry geo;
  Launch launch;
  bool need_x = true, need_weights = true;  // false: that gradient is empty, not computed
  static constexpr int kInputs = 6;
  static constexpr bool kWork = false;
  using A = KanConvBackwardArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x,      &A::grid,          &A::base_weight,
                                                 &A::spline_weight, &A::spline_scaler, &A::grad_out,
                                                 &A::grad_x, &A::grad_base_weight, &A::grad_spline_weight,
                                                 &A::grad_spline_scaler};
};

// "silu, gelu, identity": the base activations the op applies itself.
const char* kan_conv_activations();

// Validate (metadata; knot values at check time on host-readable backends) and give the output shapes.
std::unique_ptr<PreparedCall> kan_conv_prepare(const KanConvArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> kan_conv_backward_prepare(const KanConvBackwardArgs& inputs, Backend b);

}  // namespace swisk
