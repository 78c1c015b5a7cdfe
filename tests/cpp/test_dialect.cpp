// The dialect's host pieces: 16-bit float conversions, accumulator types, the math shim.
#include <cstring>
#include <type_traits>

#include "harness.h"
#include "swisk/kernels/dialect.h"

using swisk::bf16;
using swisk::f16;

TEST(Dialect, HalfKnownBits) {
  EXPECT_EQ(f16(1.0f).bits, 0x3c00);
  EXPECT_EQ(f16(-2.0f).bits, 0xc000);
  EXPECT_EQ(f16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(f16(65520.0f).bits, 0x7c00);           // rounds to inf
  EXPECT_EQ(f16(5.9604644775390625e-08f).bits, 1);  // smallest subnormal
  EXPECT_EQ(f16(1.0f + 1.0f / 2048).bits, 0x3c00);  // tie to even (down)
  EXPECT_EQ(f16(1.0f + 3.0f / 2048).bits, 0x3c02);  // tie to even (up)
  EXPECT_TRUE(std::isnan(float(f16(NAN))));
  EXPECT_EQ(float(f16(-INFINITY)), -INFINITY);
}

TEST(Dialect, HalfRoundTripEveryValue) {
  int bad = 0;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    f16 h;
    h.bits = uint16_t(b);
    const float f = float(h);
    if (std::isnan(f)) continue;
    bad += f16(f).bits != h.bits;
  }
  EXPECT_EQ(bad, 0);
}

TEST(Dialect, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(float(bf16(3.140625f)), 3.140625f);
  float tie_down, tie_up;
  uint32_t u = 0x3f808000u, v = 0x3f818000u;  // halfway cases with even / odd lower neighbour
  std::memcpy(&tie_down, &u, 4);
  std::memcpy(&tie_up, &v, 4);
  EXPECT_EQ(bf16(tie_down).bits, 0x3f80);
  EXPECT_EQ(bf16(tie_up).bits, 0x3f82);
  EXPECT_TRUE(std::isnan(float(bf16(NAN))));
}

TEST(Dialect, AccumulatorTypes) {
  EXPECT_TRUE((std::is_same_v<sk_acc<float>::type, float>));
  EXPECT_TRUE((std::is_same_v<sk_acc<sk_half>::type, float>));
  EXPECT_TRUE((std::is_same_v<sk_acc<sk_bfloat>::type, float>));
  EXPECT_TRUE((std::is_same_v<sk_acc<double>::type, double>));
}

TEST(Dialect, MathShim) {
  EXPECT_NEAR(sk_exp(1.0f), 2.718281828f, 1e-6);
  EXPECT_NEAR(sk_exp(1.0), 2.718281828459045, 1e-15);
  EXPECT_NEAR(sk_cos(0.5f), 0.8775825619f, 1e-7);
  EXPECT_TRUE(sk_isnan(sk_nan(1.0f)));
  EXPECT_TRUE(sk_isinf(1.0f / 0.0f));
  EXPECT_EQ(sk_abs(-3.0), 3.0);
}
