// Frontends of the B-spline basis ops: validate every argument, then dispatch.
#include "swisk/ops/bspline.h"

#include "validate.h"

namespace swisk {

static void check_common(const char* op, const TensorView& x, const TensorView& grid, int order, Backend b) {
  check_float(op, "x", x);
  check_min_ndim(op, "x", x, 1, "(..., in)");
  check_same_dtype(op, "grid", grid, x, "x");
  check_same_device(op, "grid", grid, x, "x");
  check_backend(op, "x", x, b);
  check_ndim(op, "grid", grid, 2, "(in, n_knots)");
  SWISK_CHECK(grid.shape[0] == x.size(-1), value, op, "grid", "must be (in, n_knots) with in = x.shape[-1] = ",
              x.size(-1), ", got ", grid.shape_str());
  SWISK_CHECK(order >= 0, value, op, "spline_order", "must be >= 0, got ", order);
  SWISK_CHECK(order <= SWISK_MAX_SPLINE_ORDER, value, op, "spline_order", "at most ", SWISK_MAX_SPLINE_ORDER,
              " is supported, got ", order);
  SWISK_CHECK(grid.shape[1] >= order + 2, value, op, "spline_order", order, " needs at least ", order + 2,
              " knots per feature, grid has ", grid.shape[1]);
  SWISK_CHECK(x.numel() < (int64_t(1) << 32), value, op, "x", "at most 2^32 elements are supported");
}

std::vector<int64_t> bspline_basis_shape(const TensorView& x, const TensorView& grid, int order, Backend b) {
  check_common("bspline_basis", x, grid, order, b);
  std::vector<int64_t> shape(x.shape, x.shape + x.ndim);
  shape.push_back(grid.shape[1] - 1 - order);
  return shape;
}

BsplineParams bspline_params(const TensorView& x, const TensorView& grid, int order) {
  BsplineParams p;
  p.in = sk_u32(grid.shape[0]);
  p.rows = p.in ? sk_u32(x.numel() / p.in) : 0;
  p.n_knots = sk_u32(grid.shape[1]);
  p.order = sk_u32(order);
  p.n_basis = p.n_knots - 1 - p.order;
  return p;
}

static void check_data(const char* op, const TensorView& x, const TensorView& grid, Backend b) {
  check_contiguous(op, "x", x);
  check_contiguous(op, "grid", grid);
  if (host_readable(b)) check_knots(op, "grid", grid);
}

void bspline_basis(const BsplineBasisArgs& a) {
  const char* op = "bspline_basis";
  auto shape = bspline_basis_shape(a.x, a.grid, a.order, a.launch.backend);
  check_data(op, a.x, a.grid, a.launch.backend);
  check_same_dtype(op, "out", a.out, a.x, "x");
  check_same_device(op, "out", a.out, a.x, "x");
  check_shape(op, "out", a.out, shape);
  check_contiguous(op, "out", a.out);
  registry().run(op, a);
}

void bspline_basis_backward(const BsplineBasisBackwardArgs& a) {
  const char* op = "bspline_basis_backward";
  check_common(op, a.x, a.grid, a.order, a.launch.backend);
  check_data(op, a.x, a.grid, a.launch.backend);
  std::vector<int64_t> shape(a.x.shape, a.x.shape + a.x.ndim);
  shape.push_back(a.grid.shape[1] - 1 - a.order);
  for (auto [name, t] : {std::pair{"grad_out", &a.grad_out}, std::pair{"grad_x", &a.grad_x}}) {
    check_same_dtype(op, name, *t, a.x, "x");
    check_same_device(op, name, *t, a.x, "x");
    check_contiguous(op, name, *t);
  }
  check_shape(op, "grad_out", a.grad_out, shape);
  shape.pop_back();
  check_shape(op, "grad_x", a.grad_x, shape);
  registry().run(op, a);
}

}  // namespace swisk
