// The emulator enforces the target's limits (grid, block, shared memory) and poisons shared memory
// before each block, so launch-geometry defects and reads of unwritten shared memory fail here.
#include <cmath>
#include <vector>

#include "emu/cuda_shim.h"
#include "harness.h"
#include "swisk/error.h"

namespace {

using ::swisk::emu::launch;
using ::swisk::emu::Target;

void noop() {}

// 12289 floats: 4 bytes over CUDA's 48 KiB of static shared memory.
__global__ void too_much_shared(float* out) {
  SWISK_SHARED(float, big, 12289);
  big[threadIdx.x] = 1.0f;
  out[threadIdx.x] = big[threadIdx.x];
}

// Two 24 KiB arrays: exactly 48 KiB, legal on CUDA, over Apple's 32 KiB.
__global__ void two_tiles(float* out) {
  SWISK_SHARED(float, a, 6144);
  SWISK_SHARED_ALIGNED(float, b, 6144);
  a[threadIdx.x] = 1.0f;
  b[threadIdx.x] = 2.0f;
  SWISK_BARRIER();
  out[threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}

// Only block 0 writes the arrays; every block reads them back.
__global__ void read_unwritten(float* f, int* i) {
  SWISK_SHARED(float, fs, 32);
  SWISK_SHARED(int, is, 32);
  const unsigned t = threadIdx.x, o = blockIdx.x * blockDim.x + t;
  if (blockIdx.x == 0) {
    fs[t] = 1.5f;
    is[t] = 7;
  }
  SWISK_BARRIER();
  f[o] = fs[t];
  i[o] = is[t];
}

// 128 KiB of dynamic shared memory (past the static 48 KiB): each thread writes and reads back its part.
__global__ void dynamic_shared(float* out) {
  SWISK_SHARED_DYNAMIC(float, big, 32768);
  const unsigned t = threadIdx.x;
  for (unsigned j = 0; j < 32; ++j) big[t + blockDim.x * j] = float(t + j);
  SWISK_BARRIER();
  float s = 0;
  for (unsigned j = 0; j < 32; ++j) s += big[(t + 1) % blockDim.x + blockDim.x * j];
  out[t] = s;
}

}  // namespace

TEST(EmulatorLimits, GridDimensions) {
  EXPECT_THROW_MSG(launch(dim3(2147483648u), dim3(1), noop), swisk::Error, "gridDim.x = 2147483648 exceeds the limit of 2147483647");
  EXPECT_THROW_MSG(launch(dim3(1, 65536), dim3(1), noop), swisk::Error, "gridDim.y = 65536 exceeds the limit of 65535");
  EXPECT_THROW_MSG(launch(dim3(1, 1, 65536), dim3(1), noop), swisk::Error, "gridDim.z = 65536");
  EXPECT_THROW_MSG(launch(dim3(0), dim3(32), noop), swisk::Error, "gridDim.x = 0");
  EXPECT_THROW_MSG(launch(dim3(4, 0), dim3(32), noop), swisk::Error, "gridDim.y = 0");
}

TEST(EmulatorLimits, BlockDimensions) {
  EXPECT_THROW_MSG(launch(dim3(1), dim3(1025), noop), swisk::Error, "blockDim.x = 1025 exceeds the limit of 1024 on CUDA");
  EXPECT_THROW_MSG(launch(dim3(1), dim3(1, 1, 65), noop), swisk::Error, "blockDim.z = 65 exceeds the limit of 64");
  EXPECT_THROW_MSG(launch(dim3(1), dim3(33, 32), noop), swisk::Error, "threads per block = 1056 exceeds the limit of 1024");
  EXPECT_THROW_MSG(launch(dim3(1), dim3(1, 0), noop), swisk::Error, "blockDim.y = 0");
  EXPECT_THROW_MSG(launch(dim3(1), dim3(64, 32), noop, Target::apple), swisk::Error, "threads per block = 2048 exceeds the limit of 1024 on Apple");
  // blockDim.z = 65 is legal on Apple GPUs: the limits are the target's.
  launch(dim3(1), dim3(1, 1, 65), noop, Target::apple);
}

TEST(EmulatorLimits, SharedMemoryOverTheLimit) {
  std::vector<float> out(32, 0.0f);
  EXPECT_THROW_MSG(SWISK_LAUNCH(too_much_shared, dim3(2), dim3(32), nullptr, out.data()), swisk::Error,
                   "shared memory: 49156 bytes per block exceed the limit of 49152 on CUDA");
  EXPECT_EQ(out[0], 0.0f);  // no thread got past the declaration
}

TEST(EmulatorLimits, SharedMemoryIsPerTarget) {
  std::vector<float> out(32, 0.0f);
  SWISK_LAUNCH(two_tiles, dim3(3), dim3(32), nullptr, out.data());
  for (float v : out) EXPECT_EQ(v, 3.0f);
  EXPECT_THROW_MSG(launch(dim3(3), dim3(32), [&] { two_tiles(out.data()); }, Target::apple), swisk::Error,
                   "shared memory: 49152 bytes per block exceed the limit of 32768 on Apple");
}

TEST(EmulatorLimits, UnwrittenSharedMemoryIsPoisoned) {
  const unsigned threads = 32, blocks = 3;
  std::vector<float> f(threads * blocks, 0.0f);
  std::vector<int> i(threads * blocks, 0);
  SWISK_LAUNCH(read_unwritten, dim3(blocks), dim3(threads), nullptr, f.data(), i.data());
  for (unsigned t = 0; t < threads; ++t) {
    EXPECT_EQ(f[t], 1.5f);
    EXPECT_EQ(i[t], 7);
  }
  // Later blocks did not write: they see the poison, not block 0's values.
  for (unsigned k = threads; k < threads * blocks; ++k) {
    EXPECT_TRUE(std::isnan(f[k]));
    EXPECT_EQ(i[k], -1);
  }
}

// A kernel's dynamic array must fit in what the launch gives, and the launch in the target's opt-in limit.
TEST(EmulatorLimits, DynamicSharedMemory) {
  std::vector<float> out(1024, 0.0f);
  auto run = [&](std::size_t bytes) {
    launch(dim3(2), dim3(1024), [&] { dynamic_shared(out.data()); }, Target::cuda_sm90, bytes);
  };
  run(131072);
  for (unsigned t = 0; t < 1024; ++t) EXPECT_EQ(out[t], float(32 * ((t + 1) % 1024) + 496));
  EXPECT_THROW_MSG(run(65536), swisk::Error, "dynamic shared memory: the kernel uses 131072 bytes, the launch gives 65536");
  EXPECT_THROW_MSG(run(227 * 1024 + 4), swisk::Error, "232452 bytes of dynamic shared memory exceed the limit of 232448 on CUDA");
}
