// B-spline expansion: the public C++ entry points (prepare once, then launch).
#pragma once

#include <memory>
#include <vector>

#include "swisk/call.h"
#include "swisk/kernels/bspline_tiled.h"

namespace swisk {

// x (..., in), grid (in, n_knots). bspline_basis: out (..., in, n_basis) holds B^(derivative)(x);
// kan_expand: out (..., base*in + in*n_basis) holds [silu^(derivative)(x) | B^(derivative)(x)].
struct BsplineBasisArgs {
  TensorView x, grid, out;
  int order = 3;
  Launch launch;
  int derivative = 0;
  bool base = false;
  static constexpr int kInputs = 2;
  static constexpr bool kWork = false;
  using A = BsplineBasisArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::grid, &A::out};
};

// grad_x (..., in) = per feature, grad (..., base*in + in*n_basis) contracted with the expanded
// operand of order `derivative` (the backward of an expansion of order derivative - 1).
struct BsplineContractArgs {
  TensorView x, grid, grad, grad_x;
  int order = 3;
  Launch launch;
  int derivative = 1;
  bool base = false;
  static constexpr int kInputs = 3;
  static constexpr bool kWork = false;
  using A = BsplineContractArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::grid, &A::grad, &A::grad_x};
};

// Validate the inputs (metadata only) and decide the output and kernel; knots are checked at launch.
std::unique_ptr<PreparedCall> bspline_basis_prepare(const BsplineBasisArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> kan_expand_prepare(const BsplineBasisArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> bspline_contract_prepare(const BsplineContractArgs& inputs, Backend b);

// For C++ callers holding their own outputs: prepare on args.launch.backend, check them, run.
void bspline_basis(const BsplineBasisArgs& args);
void kan_expand(const BsplineBasisArgs& args);
void bspline_contract(const BsplineContractArgs& args);

// Kernel parameters of a validated call.
BsplineParams bspline_params(const TensorView& x, const TensorView& grid, int order, int derivative, bool base);

}  // namespace swisk
