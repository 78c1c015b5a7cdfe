// The cuda-emu backend: the CUDA entry points of cuda/*.cu compiled as C++ and run on the emulator.
#include "swisk/registry.h"
#include "emu/cuda_shim.h"

#include "../../../cuda/bspline.cu"
#include "../../../cuda/kan.cu"
#include "../../../cuda/kan_mma.cu"
#include "../../../cuda/sketch.cu"
#include "../../../cuda/wavelet.cu"

namespace swisk {

void register_cuda_emu_backend(Registry& r) {
  cuda_emu::register_bspline(r, Backend::cuda_emu);
  cuda_emu::register_kan(r, Backend::cuda_emu);
  cuda_emu::register_wavelet(r, Backend::cuda_emu);
  cuda_emu::register_sketch(r, Backend::cuda_emu);
}

}  // namespace swisk
