// Fused KAN linear layer: the public C++ entry points (validate, then dispatch on the registry).
#pragma once

#include <vector>

#include "swisk/kernels/kan.h"
#include "swisk/registry.h"

namespace swisk {

// x (..., in), grid (in, n_knots), base_weight (out, in) or empty (no base branch),
// spline_weight (out, in, n_basis), spline_scaler (out, in) or empty, out (..., out).
// work: a 1-D scratch tensor of kan_linear_workspace(...) elements (fp32, fp64 for fp64 inputs).
// tf32: fp32 inputs may run on the CUDA matrix units as tf32 (torch.backends.cuda.matmul.allow_tf32).
struct KanLinearArgs {
  TensorView x, grid, base_weight, spline_weight, spline_scaler, out, work;
  int order = 3;
  Launch launch;
  bool tf32 = false;
};

// The CUDA tensor-core forward applies to fp16/bf16, and to fp32 when tf32 is allowed.
inline bool kan_mma_applies(DType d, bool tf32) { return d == DType::f16 || d == DType::bf16 || (tf32 && d == DType::f32); }

// Gradients of every argument but grid; grad_base_weight / grad_spline_scaler are empty when their
// argument is. stage: -1 runs the whole backward; Metal (one plan per call) runs stages 0, 1, 2 in turn.
struct KanLinearBackwardArgs {
  TensorView x, grid, base_weight, spline_weight, spline_scaler, grad_out;
  TensorView grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler, work;
  int order = 3;
  int stage = -1;
  Launch launch;
};

// Checks shapes, dtypes, devices and spline_order (no data access); returns the output shape.
std::vector<int64_t> kan_linear_shape(const TensorView& x, const TensorView& grid, const TensorView& base_weight,
                                      const TensorView& spline_weight, const TensorView& spline_scaler, int order,
                                      Backend b);
// Scratch elements the backend needs (forward or backward) for these sizes.
int64_t kan_linear_workspace(int64_t in, int64_t out, int64_t n_basis, int order, DType dtype, Backend b,
                             bool backward, bool tf32 = false);
void kan_linear(const KanLinearArgs& args);
void kan_linear_backward(const KanLinearBackwardArgs& args);

// Kernel parameters of a validated call.
KanParams kan_params(const TensorView& x, const TensorView& grid, const TensorView& base_weight,
                     const TensorView& spline_weight, const TensorView& spline_scaler, int order);

}  // namespace swisk
