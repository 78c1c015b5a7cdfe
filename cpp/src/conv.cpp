// KAN convolution frontend: one validation of the arguments and the output shapes; the op runs on
// the GEMM route composed in Python (tiles of unfolded bases from kan_expand, the vendor GEMM).
#include "swisk/ops/conv.h"

#include "swisk/kernels/bspline.h"
#include "validate.h"

namespace swisk {

static constexpr const char* kActivations[] = {"silu", "gelu", "identity"};

const char* kan_conv_activations() { return "silu, gelu, identity"; }

static constexpr int64_t kMaxExtent = int64_t(1) << 31;  // stride, dilation, padding, padded sizes

static void check_list(const char* op, const char* arg, const std::vector<int64_t>& v, size_t n, int64_t lo) {
  SWISK_CHECK(v.size() == n, value, op, arg, "expected ", n, " values (one per spatial dimension",
              n > 0 && std::string(arg) == "padding" ? ", before and after" : "", "), got ", v.size());
  for (int64_t e : v) {
    SWISK_CHECK(e >= lo, value, op, arg, "every value must be >= ", lo, ", got ", e);
    SWISK_CHECK(e < kMaxExtent, value, op, arg, "every value must be below 2^31, got ", e);
  }
}

// The output shape; every metadata check of the op.
template <class Args>
static std::vector<int64_t> kan_conv_shape(const char* op, const Args& a, Backend b) {
  const TensorView &x = a.x, &grid = a.grid, &sw = a.spline_weight;
  const KanConvGeometry& g = a.geo;
  check_float(op, "x", x);
  check_backend(op, "x", x, b);
  for (auto [name, t] : {std::pair{"grid", &grid}, std::pair{"spline_weight", &sw}}) {
    check_same_dtype(op, name, *t, x, "x");
    check_same_device(op, name, *t, x, "x");
  }
  SWISK_CHECK(sw.ndim >= 3 && sw.ndim <= 5, value, op, "spline_weight",
              "must be (out, in_channels/groups·n_basis, *kernel) with 1 to 3 kernel dimensions, got ",
              sw.shape_str());
  const int d = sw.ndim - 2;
  SWISK_CHECK(x.ndim >= d + 1, value, op, "x", "must be (..., channels", d == 1 ? ", length" : ", *spatial",
              ") with ", d, " spatial dimension(s), got ", x.shape_str());
  const int cdim = x.ndim - d - 1;
  const int64_t C = x.shape[cdim], O = sw.shape[0];
  check_ndim(op, "grid", grid, 2, "(in_channels, n_knots)");
  SWISK_CHECK(grid.shape[0] == C, value, op, "grid", "must be (in_channels, n_knots) with in_channels = ", C,
              ", got ", grid.shape_str());
  SWISK_CHECK(g.order >= 0, value, op, "spline_order", "must be >= 0, got ", g.order);
  const int max_order = b == Backend::cpu ? SWISK_MAX_CPU_SPLINE_ORDER : SWISK_MAX_GPU_SPLINE_ORDER;
  SWISK_CHECK(g.order <= max_order, value, op, "spline_order", "at most ", max_order, " is supported on ",
              backend_name(b), ", got ", g.order);
  SWISK_CHECK(grid.shape[1] >= g.order + 2, value, op, "spline_order", g.order, " needs at least ", g.order + 2,
              " knots per channel, grid has ", grid.shape[1]);
  const int64_t nb = grid.shape[1] - 1 - g.order;
  SWISK_CHECK(g.groups >= 1, value, op, "groups", "must be >= 1, got ", g.groups);
  SWISK_CHECK(C % g.groups == 0, value, op, "groups", "must divide in_channels = ", C, ", got ", g.groups);
  SWISK_CHECK(O % g.groups == 0, value, op, "groups", "must divide out_channels = ", O, ", got ", g.groups);
  const int64_t cg = C / g.groups;
  SWISK_CHECK(sw.shape[1] == cg * nb, value, op, "spline_weight", "must be (out, in_channels/groups·n_basis = ",
              cg * nb, ", *kernel) with n_basis = n_knots - 1 - spline_order = ", nb, ", got ", sw.shape_str());
  std::vector<int64_t> wshape{O, cg};
  for (int k = 0; k < d; ++k) {
    SWISK_CHECK(sw.shape[2 + k] >= 1, value, op, "spline_weight", "kernel sizes must be >= 1, got ", sw.shape_str());
    wshape.push_back(sw.shape[2 + k]);
  }
  for (auto [name, t] : {std::pair{"base_weight", &a.base_weight}, std::pair{"spline_scaler", &a.spline_scaler}}) {
    if (!present(*t)) continue;
    check_same_dtype(op, name, *t, x, "x");
    check_same_device(op, name, *t, x, "x");
    check_shape(op, name, *t, wshape);
  }
  check_list(op, "stride", g.stride, d, 1);
  check_list(op, "dilation", g.dilation, d, 1);
  check_list(op, "padding", g.padding, 2 * d, 0);
  bool known = false;
  for (const char* n : kActivations) known = known || g.activation == n;
  SWISK_CHECK(known, value, op, "base_activation", "unknown activation '", g.activation, "'; valid: ",
              kan_conv_activations());
  std::vector<int64_t> shape(x.shape, x.shape + cdim);
  shape.push_back(O);
  double elements = double(C);  // of the padded input, which the route copies
  for (int64_t k = 0; k < cdim; ++k) elements *= double(x.shape[k]);
  for (int k = 0; k < d; ++k) {
    const int64_t span = g.dilation[k] * (sw.shape[2 + k] - 1) + 1;
    const int64_t padded = x.shape[cdim + 1 + k] + g.padding[2 * k] + g.padding[2 * k + 1];
    SWISK_CHECK(padded < kMaxExtent, value, op, "padding",
                "the padded size must be below 2^31 in every dimension, got ", padded, " in dimension ", k);
    // torch's convolutions take no empty spatial dimension unless the input is empty already (N·C = 0)
    SWISK_CHECK(x.shape[cdim + 1 + k] > 0 || elements == 0, value, op, "x", "spatial sizes must be >= 1 (as torch's "
                "convolutions), got ", x.shape_str());
    SWISK_CHECK(padded >= span, value, op, "x", "spatial size ", x.shape_str(), " (padded: ", padded,
                " in dimension ", k, ") is smaller than the dilated kernel (", span, ")");
    shape.push_back((padded - span) / g.stride[k] + 1);
    elements *= double(padded);
  }
  SWISK_CHECK(elements < double(int64_t(1) << 48), value, op, "padding", "the padded input would hold ", elements,
              " elements (at most 2^48 are supported)");
  return shape;
}

template <class Args>
static void check_grid_values(const Args& a) {
  if (host_readable(a.launch.backend)) check_knots("kan_conv", "grid", a.grid);
}

std::unique_ptr<PreparedCall> kan_conv_prepare(const KanConvArgs& a, Backend b) {
  auto shape = kan_conv_shape("kan_conv", a, b);
  auto c = make_plan_call("kan_conv", a, b, &check_grid_values<KanConvArgs>);
  c->outputs = {shape};
  c->zero_outputs = {0};
  return c;
}

std::unique_ptr<PreparedCall> kan_conv_backward_prepare(const KanConvBackwardArgs& a, Backend b) {
  const char* op = "kan_conv_backward";
  auto shape = kan_conv_shape(op, a, b);
  check_same_dtype(op, "grad_out", a.grad_out, a.x, "x");
  check_same_device(op, "grad_out", a.grad_out, a.x, "x");
  check_shape(op, "grad_out", a.grad_out, shape);
  auto c = make_plan_call(op, a, b, &check_grid_values<KanConvBackwardArgs>);
  c->outputs = kan_gradient_shapes(a.x, a.base_weight, a.spline_weight, a.spline_scaler, a.need_x, a.need_weights);
  c->zero_outputs = {0, 0, 0, 0};
  return c;
}

}  // namespace swisk
