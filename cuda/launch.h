// Launch helpers shared by cuda/*.cu, which compile with nvcc (the CUDA backend) and as C++ on the
// emulator (the cuda-emu backend, through cpp/src/emu/cuda_shim.h). SWISK_CUDA_NS names the namespace.
#pragma once

#include "swisk/kernels/dialect.h"
#include "gpu_launch.h"
#include "swisk/registry.h"

#if !defined(SWISK_CUDA_EMU)
#include <cuda_runtime.h>
#define SWISK_CUDA_NS cuda_backend
// Launches on the caller's stream; a launch error is raised, never a host synchronisation.
#define SWISK_LAUNCH(kernel, grid, block, stream, ...)                                          \
  do {                                                                                          \
    kernel<<<(grid), (block), 0, static_cast<cudaStream_t>(stream)>>>(__VA_ARGS__);             \
    ::swisk::cuda_backend::check_launch(#kernel);                                               \
  } while (0)
namespace swisk::cuda_backend {
void check_launch(const char* what);
}
#else
#define SWISK_CUDA_NS cuda_emu
#endif

namespace swisk::SWISK_CUDA_NS {

__device__ __forceinline__ SkIdx cuda_idx() {
  return SkIdx{threadIdx.x, threadIdx.y, blockIdx.x, blockIdx.y, blockDim.x, blockDim.y, gridDim.x, gridDim.y};
}

using ::swisk::gpu_float_only;
using ::swisk::grid_stride_blocks;

}  // namespace swisk::SWISK_CUDA_NS
