// Frontends of the B-spline basis ops: validate once (prepare), then launch.
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

BsplineParams bspline_params(const TensorView& x, const TensorView& grid, int order) {
  BsplineParams p;
  p.in = sk_u32(grid.shape[0]);
  p.rows = p.in ? sk_u32(x.numel() / p.in) : 0;
  p.n_knots = sk_u32(grid.shape[1]);
  p.order = sk_u32(order);
  p.n_basis = p.n_knots - 1 - p.order;
  return p;
}

template <class Args>
static void check_grid_values(const Args& a) {
  if (host_readable(a.launch.backend)) check_knots("bspline_basis", "grid", a.grid);
}

static std::vector<int64_t> basis_shape(const char* op, const TensorView& x, const TensorView& grid, int order,
                                        Backend b) {
  check_common(op, x, grid, order, b);
  check_contiguous(op, "x", x);
  check_contiguous(op, "grid", grid);
  std::vector<int64_t> shape(x.shape, x.shape + x.ndim);
  shape.push_back(grid.shape[1] - 1 - order);
  return shape;
}

std::unique_ptr<PreparedCall> bspline_basis_prepare(const BsplineBasisArgs& a, Backend b) {
  auto shape = basis_shape("bspline_basis", a.x, a.grid, a.order, b);
  auto c = make_call("bspline_basis", a, b, &check_grid_values<BsplineBasisArgs>);
  c->outputs = {shape};
  c->zero_outputs = {0};
  return c;
}

std::unique_ptr<PreparedCall> bspline_basis_backward_prepare(const BsplineBasisBackwardArgs& a, Backend b) {
  const char* op = "bspline_basis_backward";
  auto shape = basis_shape(op, a.x, a.grid, a.order, b);
  check_same_dtype(op, "grad_out", a.grad_out, a.x, "x");
  check_same_device(op, "grad_out", a.grad_out, a.x, "x");
  check_shape(op, "grad_out", a.grad_out, shape);
  check_contiguous(op, "grad_out", a.grad_out);
  auto c = make_call(op, a, b, &check_grid_values<BsplineBasisBackwardArgs>);
  c->outputs = {std::vector<int64_t>(a.x.shape, a.x.shape + a.x.ndim)};
  c->zero_outputs = {0};
  return c;
}

void bspline_basis(const BsplineBasisArgs& a) {
  auto c = bspline_basis_prepare(a, a.launch.backend);
  run_prepared(*c, "bspline_basis", {&a.x, &a.grid, &a.out});
}

void bspline_basis_backward(const BsplineBasisBackwardArgs& a) {
  auto c = bspline_basis_backward_prepare(a, a.launch.backend);
  run_prepared(*c, "bspline_basis_backward", {&a.x, &a.grid, &a.grad_out, &a.grad_x});
}

}  // namespace swisk
