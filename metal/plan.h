// Metal dispatches: which kernel, what geometry, which of the op's tensors binds to which buffer
// slot (decided here, against the op's tensor list), which parameter bytes.
#pragma once

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "gpu_launch.h"
#include "swisk/call.h"

namespace swisk::metal {

// Kernel name of a family for a dtype: "swisk_<family>_<f32|f16|bf16>".
std::string kernel_name(const char* family, DType d);

// A dispatch of (groups x 1 x 1) threadgroups of `threads`; tensors are members of a, bound to slots
// 0, 1, ... in the order given, the parameter bytes to the next slot.
template <class Args, class Params>
MetalDispatch make_plan(const Args& a, const char* family, const Params& p, uint32_t groups, uint32_t threads,
                        std::initializer_list<const TensorView*> tensors) {
  MetalDispatch d;
  d.kernel = kernel_name(family, a.x.dtype);
  d.grid[0] = groups;
  d.threadgroup[0] = threads;
  d.params.resize(sizeof(Params));
  std::memcpy(d.params.data(), &p, sizeof(Params));
  for (const TensorView* t : tensors) d.buffers.push_back(tensor_index(a, t));
  return d;
}

// Appends the dispatch to the call's list: Python performs it on torch's MPS stream (metal), or on
// the emulator through the same binder (metal-emu).
void submit(const Launch& launch, MetalDispatch&& d);

// A dispatch run on the emulator with the given buffers (cpp/src/emu/metal_emu.cpp).
void run_emulated(const MetalDispatch& d, const std::vector<void*>& buffers);

using ::swisk::gpu_float_only;
using ::swisk::grid_stride_blocks;

}  // namespace swisk::metal
