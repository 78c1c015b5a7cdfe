// Lets the CUDA entry points in cuda/*.cu compile as C++ and run on the emulator.
#pragma once

#include "emu/emulator.h"

#define SWISK_CUDA_EMU 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

typedef ::swisk::emu::Dim3 dim3;
typedef void* cudaStream_t;

#define threadIdx (::swisk::emu::coords().thread)
#define blockIdx (::swisk::emu::coords().block)
#define blockDim (::swisk::emu::coords().block_dim)
#define gridDim (::swisk::emu::coords().grid_dim)
#define warpSize (int(::swisk::emu::Target::cuda_sm90.warp_size))
inline void __syncthreads() { ::swisk::emu::barrier(); }

// Shared arrays go through the emulator, which counts them against the 48 KiB limit and poisons
// them before each block (the dialect is included first so these definitions are the ones used).
#include "swisk/kernels/dialect.h"
#undef SWISK_SHARED
#undef SWISK_SHARED_ALIGNED
#define SWISK_SHARED(T, name, n) SWISK_EMU_SHARED(T, name, n, alignof(T))
#define SWISK_SHARED_ALIGNED(T, name, n) SWISK_EMU_SHARED(T, name, n, 32)

// SWISK_LAUNCH(kernel, grid, block, stream, args...) runs the kernel on the emulator.
#define SWISK_LAUNCH(kernel, grid, block, stream, ...) \
  ::swisk::emu::launch((grid), (block), [&] { kernel(__VA_ARGS__); }, ::swisk::emu::Target::cuda_sm90)
