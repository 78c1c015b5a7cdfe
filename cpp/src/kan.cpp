// Frontends of the fused KAN linear op: validate once (prepare), then launch.
#include "swisk/ops/kan.h"

#include "swisk/kernels/kan_mma.h"

#include <algorithm>

#include "validate.h"

namespace swisk {

static void check_operand(const char* op, const char* arg, const TensorView& t, const TensorView& x) {
  check_same_dtype(op, arg, t, x, "x");
  check_same_device(op, arg, t, x, "x");
}

static std::vector<int64_t> kan_linear_shape(const TensorView& x, const TensorView& grid, const TensorView& bw,
                                      const TensorView& sw, const TensorView& sc, int order, Backend b, bool gemm) {
  const char* op = "kan_linear";
  check_float(op, "x", x);
  check_min_ndim(op, "x", x, 1, "(..., in)");
  check_backend(op, "x", x, b);
  check_operand(op, "grid", grid, x);
  check_operand(op, "spline_weight", sw, x);
  check_ndim(op, "grid", grid, 2, "(in, n_knots)");
  const int64_t in = x.size(-1);
  SWISK_CHECK(grid.shape[0] == in, value, op, "grid", "must be (in, n_knots) with in = x.shape[-1] = ", in, ", got ",
              grid.shape_str());
  SWISK_CHECK(order >= 0, value, op, "spline_order", "must be >= 0, got ", order);
  const int max_order = !gemm ? SWISK_MAX_SPLINE_ORDER
                        : b == Backend::cpu ? SWISK_MAX_CPU_SPLINE_ORDER : SWISK_MAX_GPU_SPLINE_ORDER;
  SWISK_CHECK(order <= max_order, value, op, "spline_order", "at most ", max_order, " is supported on ",
              backend_name(b), gemm ? "" : " by the fused kernels", ", got ", order);
  SWISK_CHECK(grid.shape[1] >= order + 2, value, op, "spline_order", order, " needs at least ", order + 2,
              " knots per feature, grid has ", grid.shape[1]);
  const int64_t nb = grid.shape[1] - 1 - order;
  check_ndim(op, "spline_weight", sw, 3, "(out, in, n_basis)");
  const int64_t out = sw.shape[0];
  SWISK_CHECK(sw.shape[1] == in && sw.shape[2] == nb, value, op, "spline_weight",
              "must be (out, in, n_basis) with in = ", in, " and n_basis = n_knots - 1 - spline_order = ", nb,
              ", got ", sw.shape_str());
  if (present(bw)) {
    check_operand(op, "base_weight", bw, x);
    check_ndim(op, "base_weight", bw, 2, "(out, in)");
    SWISK_CHECK(bw.shape[0] == out && bw.shape[1] == in, value, op, "base_weight", "must be (out, in) = (", out, ", ",
                in, ") to match spline_weight and x, got ", bw.shape_str());
  }
  if (present(sc)) {
    check_operand(op, "spline_scaler", sc, x);
    check_ndim(op, "spline_scaler", sc, 2, "(out, in)");
    SWISK_CHECK(sc.shape[0] == out && sc.shape[1] == in, value, op, "spline_scaler", "must be (out, in) = (", out,
                ", ", in, ") to match spline_weight, got ", sc.shape_str());
  }
  SWISK_CHECK(x.numel() < (int64_t(1) << 32), value, op, "x", "at most 2^32 elements are supported");
  SWISK_CHECK(out * in * (nb + 1) < (int64_t(1) << 32), value, op, "spline_weight",
              "at most 2^32 elements are supported");
  std::vector<int64_t> shape(x.shape, x.shape + x.ndim);
  shape.back() = out;
  return shape;
}

int64_t kan_linear_workspace(int64_t in, int64_t out, int64_t nb, int order, DType d, Backend b, bool backward,
                             bool tf32) {
  const int64_t base = kan_linear_scratch_base(in, out, nb, order, d, b, backward, tf32);
  const bool mma = (b == Backend::cuda || b == Backend::cuda_emu) && kan_mma_applies(d, tf32);
  if (backward || !mma) return base;  // the other GPU forwards check the weights themselves
  KanParams p{};
  p.in = sk_u32(in), p.out = sk_u32(out);
  const int64_t bytes = int64_t(kan_nonfinite_words(p)) * 4, elem = d == DType::f64 ? 8 : 4;
  return base + (bytes + elem - 1) / elem;  // then the non-finite weight scan's words
}

int64_t kan_linear_scratch_base(int64_t in, int64_t out, int64_t nb, int order, DType d, Backend b, bool backward,
                                bool tf32) {
  // CPU: kan_cpu_layout. GPU kernels: the unscaled spline-weight gradient (out, in, nb) in backward; the
  // CUDA tensor-core forward (fp16/bf16, fp32 as tf32): the packed weights (out, cpad), in fp32 elements.
  if (b == Backend::cpu) return kan_cpu_layout(in, out, nb, order, d, backward).total;
  if (backward) return out * in * nb;
  if ((b != Backend::cuda && b != Backend::cuda_emu) || !kan_mma_applies(d, tf32)) return 0;
  const int64_t packed = int64_t(kan_mma_packed(sk_u32(in), sk_u32(out), sk_u32(nb)));
  return d == DType::f32 ? packed : (packed + 1) / 2;
}

KanCpuLayout kan_cpu_layout(int64_t in, int64_t out, int64_t nb, int order, DType d, bool backward) {
  const int64_t lanes = d == DType::f64 ? 8 : 16, elem = d == DType::f64 ? 8 : 4;
  const auto up = [&](int64_t n, int64_t m) { return (n + m - 1) / m * m; };
  KanCpuLayout l{};
  const int64_t bound = kan_cpu_chunk_bytes(in, out, nb, elem, backward);
  l.ns = std::max<int64_t>(nb, int64_t(order) + 1);
  l.nq = 1 + l.ns + (backward ? 1 : 0);
  // Forward: chunks of outputs, whole register tiles (4 vectors) where the bound allows; backward:
  // chunks of features, 16 at a time. At least one vector or 16 features per chunk.
  if (backward) {
    const int64_t per_feature = std::max<int64_t>(1, l.nq * up(out, lanes) * elem * 2);
    l.outc = l.outp = up(out, lanes);
    l.inc = std::min(std::max<int64_t>(16, bound / per_feature / 16 * 16), in);
  } else {
    const int64_t per_out = std::max<int64_t>(1, in * l.nq * elem), chunk = bound / per_out;
    l.inc = in;
    l.outc = l.outp = std::min(chunk >= 4 * lanes ? chunk / (4 * lanes) * (4 * lanes)
                                                  : std::max<int64_t>(lanes, chunk / lanes * lanes),
                               up(out, lanes));
  }
  l.wt = up(in * order * (nb + 1 + order), lanes);
  const int64_t weights = l.inc * l.nq * l.outp;
  l.gwt = l.wt + weights + 8 * lanes;  // a gap: wt and gwt rows do not alias in the L1's sets
  l.total = (backward ? l.gwt + weights : l.wt + weights) + lanes;
  return l;
}

sk_i32* kan_nonfinite_scratch(const KanLinearArgs& a, const KanParams& p) {
  const int64_t base = kan_linear_scratch_base(p.in, p.out, p.n_basis, a.order, a.x.dtype, a.launch.backend, false,
                                               a.tf32);
  return reinterpret_cast<sk_i32*>(static_cast<char*>(a.work.data) + base * (a.x.dtype == DType::f64 ? 8 : 4));
}

KanParams kan_params(const TensorView& x, const TensorView& grid, const TensorView& bw, const TensorView& sw,
                     const TensorView& sc, int order) {
  KanParams p;
  p.in = sk_u32(grid.shape[0]);
  p.rows = p.in ? sk_u32(x.numel() / p.in) : 0;
  p.out = sk_u32(sw.shape[0]);
  p.n_knots = sk_u32(grid.shape[1]);
  p.order = sk_u32(order);
  p.n_basis = p.n_knots - 1 - p.order;
  p.has_base = present(bw) ? 1 : 0;
  p.has_scaler = present(sc) ? 1 : 0;
  return p;
}

static void check_layout(const char* op, const TensorView& x, const TensorView& grid, const TensorView& bw,
                         const TensorView& sw, const TensorView& sc) {
  check_contiguous(op, "x", x);
  check_contiguous(op, "grid", grid);
  check_contiguous(op, "spline_weight", sw);
  if (present(bw)) check_contiguous(op, "base_weight", bw);
  if (present(sc)) check_contiguous(op, "spline_scaler", sc);
}

template <class Args>
static void check_grid_values(const Args& a) {
  if (host_readable(a.launch.backend)) check_knots("kan_linear", "grid", a.grid);
}

std::unique_ptr<PreparedCall> kan_linear_prepare(const KanLinearArgs& a, Backend b) {
  const char* op = "kan_linear";
  auto shape = kan_linear_shape(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order, b, a.gemm);
  check_layout(op, a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler);
  if (a.gemm) {
    auto c = make_plan_call(op, a, b, &check_grid_values<KanLinearArgs>);
    c->outputs = {shape};
    c->zero_outputs = {0};
    return c;
  }
  auto c = make_call(op, a, b, &check_grid_values<KanLinearArgs>);
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  c->outputs = {shape};
  c->zero_outputs = {uint8_t(p.in == 0)};  // no features: y = 0, which no kernel writes
  c->work = b == Backend::cpu && kan_cpu_direct(p.rows, a.x.dtype)
                ? kan_cpu_layout(p.in, p.out, p.n_basis, a.order, a.x.dtype, false).wt
                : kan_linear_workspace(p.in, p.out, p.n_basis, a.order, a.x.dtype, b, false, a.tf32);
  return c;
}

std::unique_ptr<PreparedCall> kan_linear_backward_prepare(const KanLinearBackwardArgs& a, Backend b) {
  const char* op = "kan_linear_backward";
  auto shape = kan_linear_shape(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order, b, a.gemm);
  check_layout(op, a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler);
  check_operand(op, "grad_out", a.grad_out, a.x);
  check_shape(op, "grad_out", a.grad_out, shape);
  check_contiguous(op, "grad_out", a.grad_out);
  auto c = a.gemm ? make_plan_call(op, a, b, &check_grid_values<KanLinearBackwardArgs>) : make_call(op, a, b, &check_grid_values<KanLinearBackwardArgs>);
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  c->outputs = kan_gradient_shapes(a.x, a.base_weight, a.spline_weight, a.spline_scaler, a.need_x, a.need_weights);
  // Nothing to contract (no outputs, features or rows): gradients the kernels leave unwritten are zero.
  const bool empty = p.out == 0 || p.in == 0 || p.rows == 0;
  const bool w = a.need_weights;
  c->zero_outputs = {uint8_t(a.need_x && (p.out == 0 || p.in == 0)), uint8_t(w && empty), uint8_t(w && empty),
                     uint8_t(w && empty)};
  if (!a.gemm)
    c->work = b == Backend::cpu && kan_cpu_direct(p.rows, a.x.dtype, true)
                  ? kan_cpu_layout(p.in, p.out, p.n_basis, a.order, a.x.dtype, true).wt
                  : kan_linear_workspace(p.in, p.out, p.n_basis, a.order, a.x.dtype, b, true);
  return c;
}

std::unique_ptr<PreparedCall> kan_unpack_prepare(const KanUnpackArgs& a, Backend b) {
  const char* op = "kan_unpack";
  check_float(op, "x", a.x);
  check_backend(op, "x", a.x, b);
  check_ndim(op, "x", a.x, 3, "(out, in, n_basis)");
  check_operand(op, "spline_weight", a.spline_weight, a.x);
  check_operand(op, "spline_scaler", a.spline_scaler, a.x);
  check_shape(op, "spline_weight", a.spline_weight, shape_of(a.x));
  check_shape(op, "spline_scaler", a.spline_scaler, {a.x.shape[0], a.x.shape[1]});
  check_contiguous(op, "x", a.x);
  check_contiguous(op, "spline_weight", a.spline_weight);
  check_contiguous(op, "spline_scaler", a.spline_scaler);
  auto c = make_call(op, a, b);
  c->outputs = {shape_of(a.x), {a.x.shape[0], a.x.shape[1]}};
  c->zero_outputs = {0, 0};
  return c;
}

void kan_linear(const KanLinearArgs& a) {
  auto c = kan_linear_prepare(a, a.launch.backend);
  run_prepared(*c, "kan_linear", {&a.x, &a.grid, &a.base_weight, &a.spline_weight, &a.spline_scaler, &a.out, &a.work});
}

void kan_linear_backward(const KanLinearBackwardArgs& a) {
  auto c = kan_linear_backward_prepare(a, a.launch.backend);
  run_prepared(*c, "kan_linear_backward",
               {&a.x, &a.grid, &a.base_weight, &a.spline_weight, &a.spline_scaler, &a.grad_out, &a.grad_x,
                &a.grad_base_weight, &a.grad_spline_weight, &a.grad_spline_scaler, &a.work});
}

}  // namespace swisk
