// The registry and the frontends' argument errors.
#include "harness.h"
#include "swisk/ops/bspline.h"
#include "views.h"

using namespace swisk;

TEST(Dispatch, BackendNames) {
  for (const char* n : {"cpu", "cuda", "mps", "cuda-emu", "metal-emu"}) EXPECT_EQ(std::string(backend_name(backend_from_name(n))), n);
  EXPECT_THROW_MSG(backend_from_name("tpu"), Error, "unknown backend 'tpu'");
  EXPECT_TRUE(backend_device(Backend::cuda_emu) == Device::cpu);
  EXPECT_TRUE(backend_device(Backend::metal) == Device::mps);
}

TEST(Dispatch, EveryHostBackendHasTheBasisOps) {
  for (Backend b : {Backend::cpu, Backend::cuda_emu, Backend::metal_emu, Backend::metal})
    for (const char* op : {"bspline_expand", "bspline_contract"}) EXPECT_TRUE(registry().has(op, b));
  EXPECT_EQ(registry().has("bspline_expand", Backend::cuda), cuda_compiled());
}

TEST(Dispatch, UnknownOpIsAnError) {
  struct Args {
    Launch launch;
  } a;
  EXPECT_THROW_MSG(registry().run("no_such_op", a), Error, "[no_such_op] device: no kernel for backend 'cpu'");
}

namespace {
struct Call {
  std::vector<float> x = std::vector<float>(12, 0.1f), out = std::vector<float>(3 * 4 * 8);
  std::vector<double> gd = uniform_knots(4, 5, 3);
  std::vector<float> g = std::vector<float>(gd.begin(), gd.end());
  BsplineBasisArgs args() { return {make_view(x, {3, 4}), make_view(g, {4, 12}), make_view(out, {3, 4, 8}), 3, {}}; }
};
ErrorKind kind_of(const BsplineBasisArgs& a) {
  try {
    bspline_basis(a);
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::runtime;
}
}  // namespace

TEST(Dispatch, BasisArgumentErrors) {
  Call c;
  auto a = c.args();
  bspline_basis(a);  // the valid call runs

  a = c.args();
  a.grid.shape[0] = 3;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "[bspline_basis] grid: must be (in, n_knots) with in = x.shape[-1] = 4");
  a = c.args();
  a.order = -1;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "[bspline_basis] spline_order: must be >= 0");
  a = c.args();
  a.order = 64;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "[bspline_basis] spline_order: at most 63 is supported on cpu");
  a = c.args();
  a.x.dtype = DType::i32;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "[bspline_basis] x: expected a floating-point tensor, got int32");
  EXPECT_TRUE(kind_of(a) == ErrorKind::type);
  a = c.args();
  a.grid.dtype = DType::f64;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "[bspline_basis] grid: dtype float64 differs from x's float32");
  a = c.args();
  a.grid.device = Device::cuda;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "[bspline_basis] grid: is on cuda:0 but x is on cpu:0");
  a = c.args();
  a.out.shape[2] = 7;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "[bspline_basis] out: must have shape (3, 4, 8), got (3, 4, 7)");
  EXPECT_TRUE(kind_of(a) == ErrorKind::value);
  a = c.args();
  a.launch.backend = Backend::cuda;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "[bspline_basis] x: is on cpu, backend cuda needs cuda tensors");
}

TEST(Dispatch, GridValuesAreChecked) {
  Call c;
  c.g[5] = c.g[4];
  EXPECT_THROW_MSG(bspline_basis(c.args()), Error, "knots must be strictly increasing; row 0 is not at index 5");
  Call d;
  d.g[13] = NAN;
  EXPECT_THROW_MSG(bspline_basis(d.args()), Error, "row 1 has a non-finite knot at 1");
}

TEST(Dispatch, EmulatedGpuBackendsRejectDouble) {
  std::vector<double> x(12, 0.1), out(3 * 4 * 8), g = uniform_knots(4, 5, 3);
  BsplineBasisArgs a{make_view(x, {3, 4}), make_view(g, {4, 12}), make_view(out, {3, 4, 8}), 3, {}};
  a.launch.backend = Backend::cuda_emu;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "float64 is not supported");
  a.launch.backend = Backend::metal_emu;
  EXPECT_THROW_MSG(bspline_basis(a), Error, "float64 is not supported on the GPU");
  a.launch.backend = Backend::cpu;
  bspline_basis(a);
  EXPECT_NEAR(out[3], 23.0 / 48 * 0 + out[3], 0);  // ran
}
