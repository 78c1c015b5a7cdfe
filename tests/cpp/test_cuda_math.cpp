// The fp32-only sin/cos that CUDA kernels use (sk_sin / sk_cos under nvcc), run here on the host.
#include <cmath>
#include <random>

#include "harness.h"
#include "swisk/kernels/dialect.h"

TEST(CudaMath, SinCosF32MatchesDoubleBelowOneMillion) {
  std::mt19937 rng(3);
  for (float range : {4.0f, 100.0f, 1e4f, 1e6f}) {
    std::uniform_real_distribution<float> U(-range, range);
    double worst = 0;
    for (int t = 0; t < 200000; ++t) {
      const float x = U(rng);
      const SkSinCos o = sk_sincos_f32(x);
      worst = std::fmax(worst, std::fmax(std::fabs(o.s - std::sin(double(x))), std::fabs(o.c - std::cos(double(x)))));
    }
    EXPECT_TRUE(worst < 1e-7);
  }
  for (float x : {0.0f, 1e-30f, -1e-20f}) {  // tiny arguments: sin x = x, cos x = 1
    EXPECT_EQ(sk_sincos_f32(x).s, x);
    EXPECT_EQ(sk_sincos_f32(x).c, 1.0f);
  }
  const float k = 1.570796371e+00f;  // quadrant boundaries
  for (int q = -8; q <= 8; ++q) {
    const SkSinCos o = sk_sincos_f32(q * k);
    EXPECT_NEAR(o.s, std::sin(double(q * k)), 1e-7);
    EXPECT_NEAR(o.c, std::cos(double(q * k)), 1e-7);
  }
}

TEST(CudaMath, SinCosF32LargeAndSpecialArguments) {
  for (float x : {2e6f, -3.5e7f, 1e30f, -3e38f}) {
    const SkSinCos o = sk_sincos_f32(x);
    EXPECT_TRUE(std::fabs(o.s) <= 1.0f && std::fabs(o.c) <= 1.0f);
  }
  for (float x : {INFINITY, -INFINITY, NAN}) {
    EXPECT_TRUE(std::isnan(sk_sincos_f32(x).s));
    EXPECT_TRUE(std::isnan(sk_sincos_f32(x).c));
  }
}
