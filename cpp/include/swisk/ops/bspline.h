// B-spline basis: the public C++ entry points (validate, then dispatch on the registry).
#pragma once

#include <vector>

#include "swisk/kernels/bspline.h"
#include "swisk/registry.h"

namespace swisk {

struct BsplineBasisArgs {
  TensorView x, grid, out;  // x (..., in), grid (in, n_knots), out (..., in, n_basis)
  int order = 3;
  Launch launch;
};

struct BsplineBasisBackwardArgs {
  TensorView x, grid, grad_out, grad_x;
  int order = 3;
  Launch launch;
};

// Checks shapes, dtypes, devices and spline_order (no data access); returns the output shape.
std::vector<int64_t> bspline_basis_shape(const TensorView& x, const TensorView& grid, int order, Backend b);
void bspline_basis(const BsplineBasisArgs& args);
void bspline_basis_backward(const BsplineBasisBackwardArgs& args);

// Kernel parameters of a validated call.
BsplineParams bspline_params(const TensorView& x, const TensorView& grid, int order);

}  // namespace swisk
