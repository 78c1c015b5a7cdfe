// The emulator: real threads per block meeting at barriers, shared memory per block, errors.
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "emu/cuda_shim.h"
#include "harness.h"
#include "swisk/error.h"
#include "swisk/kernels/bspline_tiled.h"
#include "swisk/kernels/dialect.h"

namespace {

// Tree reduction in shared memory: wrong without working barriers and block-shared arrays.
__global__ void block_sum(const float* in, float* out, unsigned n) {
  SWISK_SHARED(float, buf, 128);
  const unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  buf[t] = i < n ? in[i] : 0.0f;
  SWISK_BARRIER();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    SWISK_BARRIER();
  }
  if (t == 0) out[blockIdx.x] = buf[0];
}

// Each thread reads what the mirrored thread wrote before the barrier.
__global__ void mirror(int* out) {
  SWISK_SHARED(int, buf, 64);
  const unsigned t = threadIdx.x;
  buf[t] = int(t * 7 + blockIdx.x);
  SWISK_BARRIER();
  out[blockIdx.x * blockDim.x + t] = buf[blockDim.x - 1 - t];
}

__global__ void divergent() {
  if (threadIdx.x == 0) return;
  SWISK_BARRIER();
}

__global__ void coords2d(unsigned* out) {
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned b = blockIdx.y * gridDim.x + blockIdx.x;
  out[b * blockDim.x * blockDim.y + t] = (blockIdx.x << 24) | (blockIdx.y << 16) | (threadIdx.x << 8) | threadIdx.y;
}

SkIdx idx() {
  return SkIdx{threadIdx.x, threadIdx.y, blockIdx.x, blockIdx.y, blockDim.x, blockDim.y, gridDim.x, gridDim.y};
}

__global__ void expand_on_any_grid(BsplineParams p, const float* x, const float* grid, float* out) {
  SWISK_SHARED(float, stage, SWISK_BSPLINE_STAGE);
  bspline_expand_staged_body<3, float>(idx(), p, x, grid, out, stage);
}

__global__ void contract_on_any_grid(BsplineParams p, const float* x, const float* grid, const float* g, float* gx) {
  SWISK_SHARED(float, stage, SWISK_BSPLINE_STAGE);
  bspline_contract_staged_body<3, float>(idx(), p, x, grid, g, gx, stage);
}

__global__ void expand_untiled(BsplineParams p, const float* x, const float* grid, float* out) {
  bspline_expand_body<3, float>(idx(), p, x, grid, out);
}

__global__ void contract_untiled(BsplineParams p, const float* x, const float* grid, const float* g, float* gx) {
  bspline_contract_body<3, float>(idx(), p, x, grid, g, gx);
}

}  // namespace

// The B-spline expansion's tiled bodies on grids of 1-5 blocks (the op's grid keeps a block on one
// group of features, so only past 4096 groups does a block move): blocks walk tiles of both groups of
// 40 features, rebuilding their knot tables, and every value matches the untiled body's on the same
// inputs (each feature its own knots; a bad knot row gives NaN bases).
TEST(Emulator, BsplineTilesAcrossFeatureGroups) {
  const unsigned rows = 70, in = 40, nk = 12, order = 3, nb = nk - 1 - order, width = in + in * nb;
  const BsplineParams p{rows, in, nk, order, nb, 0, 1, width};
  std::vector<float> x(rows * in), grid(in * nk), g(rows * width);
  for (unsigned i = 0; i < in; ++i)
    for (unsigned t = 0; t < nk; ++t)
      grid[i * nk + t] = -2.2f + 0.4f * float(t) * (1 + 0.01f * float(i)) + 0.05f * float(t % 3);
  grid[7 * nk + 4] = grid[7 * nk + 3];  // feature 7: not strictly increasing
  for (unsigned e = 0; e < rows * in; ++e) x[e] = 2.1f * std::sin(0.37f * float(e) + 1.0f);
  for (unsigned e = 0; e < rows * width; ++e) g[e] = std::cos(0.11f * float(e));
  std::vector<float> want(rows * width), want_gx(rows * in);
  SWISK_LAUNCH(expand_untiled, dim3(8), dim3(256), nullptr, p, x.data(), grid.data(), want.data());
  BsplineParams pc = p;
  pc.deriv = 1;
  SWISK_LAUNCH(contract_untiled, dim3(8), dim3(256), nullptr, pc, x.data(), grid.data(), g.data(), want_gx.data());
  for (unsigned blocks : {1u, 3u, 5u}) {
    std::vector<float> out(rows * width, -7.f), gx(rows * in, -7.f);
    SWISK_LAUNCH(expand_on_any_grid, dim3(blocks), dim3(256), nullptr, p, x.data(), grid.data(), out.data());
    SWISK_LAUNCH(contract_on_any_grid, dim3(blocks), dim3(256), nullptr, pc, x.data(), grid.data(), g.data(),
                 gx.data());
    for (unsigned e = 0; e < out.size(); ++e) {
      if (std::isnan(want[e])) EXPECT_TRUE(std::isnan(out[e]));
      else EXPECT_NEAR(out[e], want[e], 1e-5f * (1 + std::fabs(want[e])));
    }
    for (unsigned e = 0; e < gx.size(); ++e) {
      if (std::isnan(want_gx[e])) EXPECT_TRUE(std::isnan(gx[e]));
      else EXPECT_NEAR(gx[e], want_gx[e], 1e-4f * (1 + std::fabs(want_gx[e])));
    }
  }
}

TEST(Emulator, SharedMemoryReduction) {
  const unsigned n = 1000, threads = 128, blocks = (n + threads - 1) / threads;
  std::vector<float> in(n), out(blocks, -1.0f);
  for (unsigned i = 0; i < n; ++i) in[i] = float((i * 37) % 11) - 5.0f;
  SWISK_LAUNCH(block_sum, dim3(blocks), dim3(threads), nullptr, in.data(), out.data(), n);
  for (unsigned b = 0; b < blocks; ++b) {
    float want = 0;
    for (unsigned i = b * threads; i < n && i < (b + 1) * threads; ++i) want += in[i];
    EXPECT_NEAR(out[b], want, 1e-4);
  }
}

TEST(Emulator, BarrierOrdersWritesBeforeReads) {
  const unsigned threads = 64, blocks = 3;
  std::vector<int> out(threads * blocks, -1);
  SWISK_LAUNCH(mirror, dim3(blocks), dim3(threads), nullptr, out.data());
  for (unsigned b = 0; b < blocks; ++b)
    for (unsigned t = 0; t < threads; ++t) EXPECT_EQ(out[b * threads + t], int((threads - 1 - t) * 7 + b));
}

TEST(Emulator, TwoDimensionalCoordinates) {
  const dim3 grid(3, 2), block(4, 2);
  std::vector<unsigned> out(3 * 2 * 4 * 2, 0xffffffffu);
  SWISK_LAUNCH(coords2d, grid, block, nullptr, out.data());
  for (unsigned by = 0; by < 2; ++by)
    for (unsigned bx = 0; bx < 3; ++bx)
      for (unsigned ty = 0; ty < 2; ++ty)
        for (unsigned tx = 0; tx < 4; ++tx)
          EXPECT_EQ(out[(by * 3 + bx) * 8 + ty * 4 + tx], (bx << 24) | (by << 16) | (tx << 8) | ty);
}

TEST(Emulator, DivergentBarrierIsAnError) {
  EXPECT_THROW_MSG(SWISK_LAUNCH(divergent, dim3(2), dim3(32), nullptr), swisk::Error, "barrier divergence");
}

TEST(Emulator, KernelExceptionsPropagate) {
  auto thrower = [] {
    if (threadIdx.x == 3) throw std::runtime_error("boom");
  };
  EXPECT_THROW_MSG(::swisk::emu::launch(dim3(1), dim3(8), thrower), swisk::Error, "boom");
}

TEST(Emulator, RejectsBadGeometry) {
  EXPECT_THROW_MSG(::swisk::emu::launch(dim3(1), dim3(2048), [] {}), swisk::Error, "blockDim.x = 2048 exceeds");
}

// One thread of block 1 fails while the others are still busy: the launch stops at that block's end,
// and the others' checks of the failure flag between blocks are synchronised with the write (TSan).
TEST(Emulator, FailureStopsLaterBlocks) {
  for (int rep = 0; rep < 10; ++rep) {
    std::vector<char> ran(16, 0);
    auto body = [&] {
      if (threadIdx.x == 0) ran[blockIdx.x] = 1;
      if (blockIdx.x == 1 && threadIdx.x == 7) throw std::runtime_error("block 1 failed");
      if (blockIdx.x == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    };
    EXPECT_THROW_MSG(::swisk::emu::launch(dim3(16), dim3(8), body), swisk::Error, "block 1 failed");
    EXPECT_EQ(int(ran[0]), 1);
    for (unsigned b = 2; b < 16; ++b) EXPECT_EQ(int(ran[b]), 0);  // block 1 may stop before thread 0 starts it
  }
}
