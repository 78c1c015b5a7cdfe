// Frontends of the B-spline expansion ops (bspline_basis, kan_expand and their contraction): validate
// once (prepare), then launch.
#include "swisk/ops/bspline.h"

#include "validate.h"

namespace swisk {

static void check_common(const char* op, const TensorView& x, const TensorView& grid, int order, int derivative,
                         bool base, Backend b) {
  check_float(op, "x", x);
  check_min_ndim(op, "x", x, 1, "(..., in)");
  check_same_dtype(op, "grid", grid, x, "x");
  check_same_device(op, "grid", grid, x, "x");
  check_backend(op, "x", x, b);
  check_ndim(op, "grid", grid, 2, "(in, n_knots)");
  check_contiguous(op, "x", x);
  check_contiguous(op, "grid", grid);
  SWISK_CHECK(grid.shape[0] == x.size(-1), value, op, "grid", "must be (in, n_knots) with in = x.shape[-1] = ",
              x.size(-1), ", got ", grid.shape_str());
  SWISK_CHECK(order >= 0, value, op, "spline_order", "must be >= 0, got ", order);
  const int max_order = b == Backend::cpu ? SWISK_MAX_CPU_SPLINE_ORDER : SWISK_MAX_GPU_SPLINE_ORDER;
  SWISK_CHECK(order <= max_order, value, op, "spline_order", "at most ", max_order, " is supported on ",
              backend_name(b), ", got ", order);
  SWISK_CHECK(grid.shape[1] >= order + 2, value, op, "spline_order", order, " needs at least ", order + 2,
              " knots per feature, grid has ", grid.shape[1]);
  SWISK_CHECK(derivative >= 0, value, op, "derivative", "must be >= 0, got ", derivative);
  SWISK_CHECK(!base || derivative <= SWISK_MAX_SILU_DERIVATIVE, value, op, "derivative", "at most ",
              SWISK_MAX_SILU_DERIVATIVE, " with the silu columns, got ", derivative);
  SWISK_CHECK(x.numel() < (int64_t(1) << 32), value, op, "x", "at most 2^32 elements are supported");
  const int64_t width = (base ? 1 : 0) * grid.shape[0] + grid.shape[0] * (grid.shape[1] - 1 - order);
  SWISK_CHECK(width < (int64_t(1) << 32), value, op, "grid", "at most 2^32 expanded columns are supported");
}

BsplineParams bspline_params(const TensorView& x, const TensorView& grid, int order, int derivative, bool base) {
  BsplineParams p;
  p.in = sk_u32(grid.shape[0]);
  p.rows = p.in ? sk_u32(x.numel() / p.in) : 0;
  p.n_knots = sk_u32(grid.shape[1]);
  p.order = sk_u32(order);
  p.n_basis = p.n_knots - 1 - p.order;
  p.deriv = sk_u32(derivative);
  p.base = base ? 1 : 0;
  p.width = p.base * p.in + p.in * p.n_basis;
  return p;
}

// The knots' values, at launch where the host can read them, in the name of the public op.
constexpr char kBasis[] = "bspline_basis", kExpand[] = "kan_expand", kContract[] = "kan_contract";
template <const char* Op, class Args>
static void check_grid_values(const Args& a) {
  if (host_readable(a.launch.backend)) check_knots(Op, "grid", a.grid);
}

// (..., in) -> (..., in, n_basis) for bspline_basis, (..., width) for kan_expand.
template <const char* Op>
static std::unique_ptr<PreparedCall> expand_prepare(const BsplineBasisArgs& a, Backend b, bool per_feature) {
  const char* op = Op;
  check_common(op, a.x, a.grid, a.order, a.derivative, a.base, b);
  const BsplineParams p = bspline_params(a.x, a.grid, a.order, a.derivative, a.base);
  std::vector<int64_t> shape(a.x.shape, a.x.shape + a.x.ndim);
  if (per_feature) shape.push_back(p.n_basis);
  else shape.back() = p.width;
  auto c = make_call("bspline_expand", a, b, &check_grid_values<Op, BsplineBasisArgs>, Op);
  c->outputs = {shape};
  c->zero_outputs = {0};
  return c;
}

std::unique_ptr<PreparedCall> bspline_basis_prepare(const BsplineBasisArgs& a, Backend b) {
  SWISK_CHECK(!a.base, value, "bspline_basis", "base", "the silu columns belong to kan_expand");
  return expand_prepare<kBasis>(a, b, true);
}

std::unique_ptr<PreparedCall> kan_expand_prepare(const BsplineBasisArgs& a, Backend b) {
  return expand_prepare<kExpand>(a, b, false);
}

std::unique_ptr<PreparedCall> bspline_contract_prepare(const BsplineContractArgs& a, Backend b) {
  const char* op = kContract;
  check_common(op, a.x, a.grid, a.order, a.derivative, a.base, b);
  const BsplineParams p = bspline_params(a.x, a.grid, a.order, a.derivative, a.base);
  check_same_dtype(op, "grad", a.grad, a.x, "x");
  check_same_device(op, "grad", a.grad, a.x, "x");
  std::vector<int64_t> shape(a.x.shape, a.x.shape + a.x.ndim);
  shape.back() = p.width;
  check_shape(op, "grad", a.grad, shape);
  check_contiguous(op, "grad", a.grad);
  auto c = make_call("bspline_contract", a, b, &check_grid_values<kContract, BsplineContractArgs>);
  c->outputs = {std::vector<int64_t>(a.x.shape, a.x.shape + a.x.ndim)};
  c->zero_outputs = {0};
  return c;
}

void bspline_basis(const BsplineBasisArgs& a) {
  auto c = bspline_basis_prepare(a, a.launch.backend);
  run_prepared(*c, "bspline_basis", {&a.x, &a.grid, &a.out});
}

void kan_expand(const BsplineBasisArgs& a) {
  auto c = kan_expand_prepare(a, a.launch.backend);
  run_prepared(*c, "kan_expand", {&a.x, &a.grid, &a.out});
}

void bspline_contract(const BsplineContractArgs& a) {
  auto c = bspline_contract_prepare(a, a.launch.backend);
  run_prepared(*c, "kan_contract", {&a.x, &a.grid, &a.grad, &a.grad_x});
}

}  // namespace swisk
