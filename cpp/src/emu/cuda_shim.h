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

#include "swisk/kernels/dialect.h"

// SWISK_LAUNCH(kernel, grid, block, stream, args...) runs the kernel on the emulator.
#define SWISK_LAUNCH(kernel, grid, block, stream, ...) \
  ::swisk::emu::launch((grid), (block), [&] { kernel(__VA_ARGS__); }, ::swisk::emu::Target::cuda_sm90)
