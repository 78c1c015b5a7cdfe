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

// A dispatch of the kernel's own grid (its *_grid(params) beside the body, as CUDA launches it) of
// (tx x ty) threadgroups; tensors are members of a, bound to slots 0, 1, ... in the order given, the
// parameter bytes to the next slot.
template <class Args, class Params, class Grid>  // Grid: SkGrid (the dialect's, not included here)
MetalDispatch make_plan(const Args& a, const char* family, const Params& p, Grid grid, uint32_t tx, uint32_t ty,
                        std::initializer_list<const TensorView*> tensors) {
  MetalDispatch d;
  d.kernel = kernel_name(family, a.x.dtype);
  d.grid[0] = grid.x;
  d.grid[1] = grid.y;
  d.threadgroup[0] = tx;
  d.threadgroup[1] = ty;
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

}  // namespace swisk::metal
