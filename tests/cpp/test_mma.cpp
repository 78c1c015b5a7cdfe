// The emulated warp MMA (swisk/kernels/mma.h): the tensor-core contract on shared-memory tiles.
#include <random>
#include <vector>

#include "emu/cuda_shim.h"
#include "harness.h"
#include "swisk/kernels/mma.h"

namespace {

// One warp: c = a0·b0 + a1·b1 over two k-steps of a 16x32 by 32x16 product.
template <typename T>
__global__ void warp_product(const T* a, const T* b, float* c) {
  SkMmaAcc<T> acc;
  sk_mma_zero(acc);
  for (unsigned kk = 0; kk < 32; kk += 16) sk_mma(acc, a + kk, 32, b + kk, 32, threadIdx.x % 32);
  sk_mma_store(c, 16, acc, threadIdx.x % 32);
}

template <typename T>
void check_product() {
  std::mt19937 rng(11);
  std::normal_distribution<float> N(0.f, 1.f);
  std::vector<T> a(16 * 32), b(16 * 32);  // a row-major 16x32, b column-major 32x16 (ld 32)
  for (auto& v : a) v = T(N(rng));
  for (auto& v : b) v = T(N(rng));
  std::vector<float> c(256, NAN);
  SWISK_LAUNCH(warp_product<T>, dim3(1), dim3(32), nullptr, a.data(), b.data(), c.data());
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      double want = 0;
      for (int k = 0; k < 32; ++k) want += double(sk_mma_operand(a[r * 32 + k])) * double(sk_mma_operand(b[col * 32 + k]));
      EXPECT_NEAR(c[r * 16 + col], want, 1e-4);
    }
}

}  // namespace

TEST(Mma, EmulatedWarpProductHalf) { check_product<sk_half>(); }
TEST(Mma, EmulatedWarpProductBfloat16) { check_product<sk_bfloat>(); }
TEST(Mma, EmulatedWarpProductTf32) { check_product<float>(); }

TEST(Mma, Tf32Rounding) {
  EXPECT_EQ(sk_mma_operand(1.0f), 1.0f);
  EXPECT_EQ(sk_mma_operand(1.0f + 1.0f / 4096), 1.0f);         // below half an ulp of tf32 (2^-10)
  EXPECT_EQ(sk_mma_operand(1.0f + 1.0f / 2048), 1.0f + 1.0f / 1024);  // the tie rounds away from zero
  EXPECT_EQ(sk_mma_operand(-1.0f - 3.0f / 2048), -1.0f - 2.0f / 1024);
  EXPECT_TRUE(std::isnan(sk_mma_operand(NAN)));
}
