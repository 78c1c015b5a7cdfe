// B-spline math (swisk/kernels/bspline.h) and the basis ops on every host backend.
#include <cmath>
#include <random>

#include "harness.h"
#include "swisk/ops/bspline.h"
#include "views.h"

using namespace swisk;

TEST(Bspline, KnownAnswerAtZero) {
  auto g = uniform_knots(1, 5, 3);
  auto b = bspline_local<double>(0.0, g.data(), int(g.size()), 3, false);
  const double want[8] = {0, 0, 1.0 / 48, 23.0 / 48, 23.0 / 48, 1.0 / 48, 0, 0};
  for (int j = 0; j < 8; ++j) EXPECT_NEAR(bspline_pick<double>(b.v, b.span, j), want[j], 1e-15);
}

TEST(Bspline, PartitionOfUnityOnNonUniformKnots) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> U(0.05, 1.0);
  for (int order = 0; order <= SWISK_MAX_SPLINE_ORDER; ++order) {
    std::vector<double> g(12 + 2 * order);
    double acc = -3;
    for (auto& k : g) k = (acc += U(rng));
    const int n = int(g.size()), nb = n - 1 - order;
    for (int s = 0; s < 200; ++s) {
      // inside [g[order], g[n-1-order]) every point is covered by a full set of bases
      const double x = g[order] + (g[n - 1 - order] - g[order]) * (s + 0.5) / 200;
      auto b = bspline_local<double>(x, g.data(), n, order, false);
      double sum = 0;
      for (int j = 0; j < nb; ++j) {
        const double v = bspline_pick<double>(b.v, b.span, j);
        EXPECT_TRUE(v >= -1e-15);
        sum += v;
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
    }
  }
}

TEST(Bspline, DerivativeMatchesFiniteDifferences) {
  auto g = uniform_knots(1, 7, 3, -2, 1.5);
  const int n = int(g.size()), nb = n - 1 - 3;
  for (double x : {-2.9, -1.3, -0.21, 0.4, 1.1, 2.2}) {
    auto b = bspline_local<double>(x, g.data(), n, 3, true);
    const double h = 1e-6;
    auto bp = bspline_local<double>(x + h, g.data(), n, 3, false);
    auto bm = bspline_local<double>(x - h, g.data(), n, 3, false);
    for (int j = 0; j < nb; ++j) {
      const double fd = (bspline_pick<double>(bp.v, bp.span, j) - bspline_pick<double>(bm.v, bm.span, j)) / (2 * h);
      EXPECT_NEAR(bspline_pick<double>(b.d, b.span, j), fd, 1e-6);
    }
  }
}

TEST(Bspline, OutsideIsZeroAndNanPropagates) {
  auto g = uniform_knots(1, 5, 3);
  for (double x : {-5.0, -2.3, 2.3, 7.0, double(INFINITY), -double(INFINITY)}) {
    auto b = bspline_local<double>(x, g.data(), int(g.size()), 3, true);
    EXPECT_EQ(b.span, -1);
    for (int j = 0; j < 8; ++j) EXPECT_EQ(bspline_pick<double>(b.v, b.span, j), 0.0);
  }
  auto b = bspline_local<double>(NAN, g.data(), int(g.size()), 3, false);
  EXPECT_EQ(b.span, -2);
  EXPECT_TRUE(std::isnan(bspline_pick<double>(b.v, b.span, 4)));
  EXPECT_FALSE(bspline_row_ok<double>(std::vector<double>{0, 1, 1, 2}.data(), 4));
  EXPECT_FALSE(bspline_row_ok<double>(std::vector<double>{0, NAN, 2, 3}.data(), 4));
  EXPECT_TRUE(bspline_row_ok<double>(g.data(), int(g.size())));
}

// The same op on cpu, cuda-emu and metal-emu gives the same bases and gradients.
TEST(Bspline, BackendsAgree) {
  const int rows = 37, in = 5, order = 3;
  auto gd = uniform_knots(in, 6, order);
  std::vector<float> g(gd.begin(), gd.end()), x(rows * in), go(rows * in * 9);
  std::mt19937 rng(3);
  std::normal_distribution<float> N(0.f, 1.f);
  for (auto& v : x) v = 1.3f * N(rng);
  for (auto& v : go) v = N(rng);
  std::vector<float> ref, ref_gx;
  for (Backend be : {Backend::cpu, Backend::cuda_emu, Backend::metal_emu}) {
    std::vector<float> out(rows * in * 9, NAN), gx(rows * in, NAN);
    BsplineBasisArgs a{make_view(x, {rows, in}), make_view(g, {in, 13}), make_view(out, {rows, in, 9}), order, {}};
    a.launch.backend = be;
    bspline_basis(a);
    BsplineBasisBackwardArgs bw{make_view(x, {rows, in}), make_view(g, {in, 13}), make_view(go, {rows, in, 9}),
                                make_view(gx, {rows, in}), order, {}};
    bw.launch.backend = be;
    bspline_basis_backward(bw);
    if (ref.empty()) {
      ref = out;
      ref_gx = gx;
      continue;
    }
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1e-6);
    for (size_t i = 0; i < gx.size(); ++i) EXPECT_NEAR(gx[i], ref_gx[i], 1e-5);
  }
}
