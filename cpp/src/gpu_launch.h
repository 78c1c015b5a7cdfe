// Host helpers shared by the GPU backends' launch code (CUDA, Metal) and their emulated twins.
#pragma once

#include "swisk/registry.h"

namespace swisk {

// Blocks (threadgroups) for a grid-stride loop over n items: capped, the loops cover the rest.
inline unsigned grid_stride_blocks(unsigned long long n, unsigned threads, unsigned cap = 4096) {
  unsigned long long b = (n + threads - 1) / threads;
  return unsigned(b == 0 ? 1 : (b > cap ? cap : b));
}

// supports() of GPU kernels: fp32, fp16 and bf16 (no double on the GPU).
template <class Args>
const char* gpu_float_only(const Args& a) {
  return a.x.dtype == DType::f64 ? "float64 is not supported on the GPU (use float32, float16 or bfloat16)" : nullptr;
}

}  // namespace swisk
