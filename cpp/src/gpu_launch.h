// Host helpers shared by the GPU backends' launch code (CUDA, Metal) and their emulated twins.
#pragma once

#include <string>

#include "swisk/registry.h"

namespace swisk {

// supports() of GPU kernels: fp32, fp16 and bf16 (no double on the GPU).
template <class Args>
const char* gpu_float_only(const Args& a) {
  return a.x.dtype == DType::f64 ? "float64 is not supported on the GPU (use float32, float16 or bfloat16)" : nullptr;
}

// "13.0" from a CUDA version number as cudaDriverGetVersion / cudaRuntimeGetVersion give it (13000).
inline std::string cuda_version_str(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Why the CUDA backend cannot run here, or "" when it can: the driver must support the runtime's
// major version (minor-version compatibility), and a device must be visible.
inline std::string cuda_version_problem(int driver, int runtime, int devices) {
  const int major = runtime / 1000;
  const std::string need = major == 13 ? "R580 or newer" : major == 12 ? "R525 or newer" : "one for CUDA " + std::to_string(major);
  if (driver <= 0)
    return "no NVIDIA driver found (swisk's CUDA runtime is " + cuda_version_str(runtime) + "; it needs a driver " + need + ")";
  if (driver / 1000 < major)
    return "the NVIDIA driver supports CUDA " + cuda_version_str(driver) + " but swisk's CUDA runtime is " +
           cuda_version_str(runtime) + ": update the driver to " + need;
  if (devices <= 0) return "no CUDA device is visible";
  return "";
}

// cuda-emu's stand-in for the calling thread's current CUDA device, and the device its last launch ran
// on (tests check that every launch runs under the op's device guard).
struct EmuCudaDevice {
  int current = 0;
  int last_launch = -1;
};
inline EmuCudaDevice& emu_cuda_device() {
  static thread_local EmuCudaDevice d;
  return d;
}

}  // namespace swisk
