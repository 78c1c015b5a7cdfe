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

// The expansion and its contraction agree on cpu, cuda-emu and metal-emu for every register bucket,
// derivative order and layout (with and without the silu columns).
TEST(Bspline, BackendsAgree) {
  const int rows = 37, in = 5, grid_size = 6;
  std::mt19937 rng(3);
  std::normal_distribution<float> N(0.f, 1.f);
  for (int order : {0, 3, 5, 9}) {
    auto gd = uniform_knots(in, grid_size, order);
    const int nk = grid_size + 2 * order + 1, nb = nk - 1 - order;
    std::vector<float> g(gd.begin(), gd.end()), x(rows * in);
    for (auto& v : x) v = 1.3f * N(rng);
    for (bool base : {false, true})
      for (int deriv : {0, 1, 2}) {
        const int width = (base ? in : 0) + in * nb;
        std::vector<float> go(rows * width);
        for (auto& v : go) v = N(rng);
        std::vector<float> ref, ref_gx;
        for (Backend be : {Backend::cpu, Backend::cuda_emu, Backend::metal_emu}) {
          std::vector<float> out(rows * width, NAN), gx(rows * in, NAN);
          BsplineBasisArgs a{make_view(x, {rows, in}), make_view(g, {in, nk}), make_view(out, {rows, width}), order,
                             {}, deriv, base};
          a.launch.backend = be;
          kan_expand(a);
          BsplineContractArgs c{make_view(x, {rows, in}), make_view(g, {in, nk}), make_view(go, {rows, width}),
                                make_view(gx, {rows, in}), order, {}, deriv, base};
          c.launch.backend = be;
          bspline_contract(c);
          if (ref.empty()) {
            ref = out;
            ref_gx = gx;
            continue;
          }
          for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 2e-5 * (1 + std::fabs(ref[i])));
          for (size_t i = 0; i < gx.size(); ++i) EXPECT_NEAR(gx[i], ref_gx[i], 2e-4 * (1 + std::fabs(ref_gx[i])));
        }
      }
  }
}

// Derivative orders of the general recursion match central differences of the order below, and are
// exactly zero past the spline order.
TEST(Bspline, DerivativeOrders) {
  const int order = 4, n = 14;
  std::vector<double> g(n);
  for (int t = 0; t < n; ++t) g[t] = -1.3 + 0.21 * t + 0.01 * t * t;
  double v[16], vp[16], vm[16];
  for (double x : {-0.77, -0.1, 0.33, 0.9}) {
    for (int m = 1; m <= order; ++m) {
      const double h = 1e-5;
      const int s = bspline_local_m<7>(x, g.data(), n, order, m, v);
      bspline_local_m<7>(x + h, g.data(), n, order, m - 1, vp);
      bspline_local_m<7>(x - h, g.data(), n, order, m - 1, vm);
      for (int j = 0; j < n - 1 - order; ++j) {
        const double fd = (bspline_pick_m<7>(vp, s, j) - bspline_pick_m<7>(vm, s, j)) / (2 * h);
        EXPECT_NEAR(bspline_pick_m<7>(v, s, j), fd, 1e-4 * (1 + std::fabs(fd)));
      }
    }
    bspline_local_m<7>(x, g.data(), n, order, order + 1, v);
    for (int r = 0; r <= 7; ++r) EXPECT_EQ(v[r], 0.0);
  }
}

// silu^(m) against central differences of silu^(m-1), including the polynomial orders m >= 3.
TEST(Bspline, SiluDerivatives) {
  for (double x : {-7.5, -1.2, 0.0, 0.4, 3.3, 11.0})
    for (int m = 1; m <= SWISK_MAX_SILU_DERIVATIVE; ++m) {
      const double h = 1e-4;
      const double fd = (sk_silu_deriv(x + h, m - 1) - sk_silu_deriv(x - h, m - 1)) / (2 * h);
      EXPECT_NEAR(sk_silu_deriv(x, m), fd, 1e-5 * (1 + std::fabs(fd)));
    }
  EXPECT_NEAR(sk_silu_deriv(0.0, 1), 0.5, 1e-15);
  EXPECT_NEAR(sk_silu_deriv(0.0, 2), 0.5, 1e-15);
}
