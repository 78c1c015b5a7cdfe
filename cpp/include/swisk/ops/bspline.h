// B-spline basis: the public C++ entry points (prepare once, then launch).
#pragma once

#include <memory>
#include <vector>

#include "swisk/call.h"
#include "swisk/kernels/bspline.h"

namespace swisk {

struct BsplineBasisArgs {
  TensorView x, grid, out;  // x (..., in), grid (in, n_knots), out (..., in, n_basis)
  int order = 3;
  Launch launch;
  static constexpr int kInputs = 2;
  static constexpr bool kWork = false;
  static constexpr TensorView BsplineBasisArgs::* kTensors[] = {&BsplineBasisArgs::x, &BsplineBasisArgs::grid,
                                                                 &BsplineBasisArgs::out};
};

struct BsplineBasisBackwardArgs {
  TensorView x, grid, grad_out, grad_x;
  int order = 3;
  Launch launch;
  static constexpr int kInputs = 3;
  static constexpr bool kWork = false;
  using A = BsplineBasisBackwardArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::grid, &A::grad_out, &A::grad_x};
};

// Validate the inputs (metadata only) and decide the output and kernel; knots are checked at launch.
std::unique_ptr<PreparedCall> bspline_basis_prepare(const BsplineBasisArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> bspline_basis_backward_prepare(const BsplineBasisBackwardArgs& inputs, Backend b);

// For C++ callers holding their own outputs: prepare on args.launch.backend, check them, run.
void bspline_basis(const BsplineBasisArgs& args);
void bspline_basis_backward(const BsplineBasisBackwardArgs& args);

// Kernel parameters of a validated call.
BsplineParams bspline_params(const TensorView& x, const TensorView& grid, int order);

}  // namespace swisk
