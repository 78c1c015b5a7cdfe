// Metal launch plans: which kernel, what geometry, which buffers, which parameter bytes.
#pragma once

#include <cstring>
#include <initializer_list>
#include <string>

#include "gpu_launch.h"
#include "swisk/registry.h"

namespace swisk::metal {

// Kernel name of a family for a dtype: "swisk_<family>_<f32|f16|bf16>".
std::string kernel_name(const char* family, DType d);

template <class Params>
MetalPlan make_plan(const char* family, DType d, const Params& p, uint32_t groups, uint32_t threads,
                    std::initializer_list<const TensorView*> tensors) {
  MetalPlan plan;
  plan.kernel = kernel_name(family, d);
  plan.grid[0] = groups;
  plan.threadgroup[0] = threads;
  plan.params.resize(sizeof(Params));
  std::memcpy(plan.params.data(), &p, sizeof(Params));
  int i = 0;
  for (const TensorView* t : tensors) {
    plan.buffers.push_back(i++);
    plan.pointers.push_back(t->data);
  }
  return plan;
}

// metal: hand the plan to Python (launch.plan); metal-emu: run it on the emulator now.
void submit(const Launch& launch, MetalPlan&& plan);

// The same entry points compiled as C++ (cpp/src/emu/metal_emu.cpp).
void run_emulated(const MetalPlan& plan);

using ::swisk::gpu_float_only;
using ::swisk::grid_stride_blocks;

}  // namespace swisk::metal
