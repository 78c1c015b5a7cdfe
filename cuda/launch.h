// Launch helpers shared by cuda/*.cu, which compile with nvcc (the CUDA backend) and as C++ on the
// emulator (the cuda-emu backend, through cpp/src/emu/cuda_shim.h). SWISK_CUDA_NS names the namespace.
#pragma once

#include <cstring>

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
// The same with `bytes` of dynamic shared memory (SWISK_SHARED_DYNAMIC), allowed past 48 KiB first.
#define SWISK_LAUNCH_SHARED(kernel, grid, block, bytes, stream, ...)                              \
  do {                                                                                          \
    ::swisk::cuda_backend::allow_shared(reinterpret_cast<const void*>(kernel), (bytes), #kernel); \
    kernel<<<(grid), (block), (bytes), static_cast<cudaStream_t>(stream)>>>(__VA_ARGS__);       \
    ::swisk::cuda_backend::check_launch(#kernel);                                               \
  } while (0)
namespace swisk::cuda_backend {
void check_launch(const char* what);
// Raises the kernel's dynamic shared memory limit on the current device to `bytes` (once per kernel,
// device and size; nothing below 48 KiB).
void allow_shared(const void* kernel, size_t bytes, const char* what);
// Raises "[op] device: ..." when CUDA cannot run here (a driver older than the runtime, no device).
void check_usable(const char* op);
int current_device(const char* op);
void set_device(const char* op, int device);
}  // namespace swisk::cuda_backend
#else
#define SWISK_CUDA_NS cuda_emu
// The emulated launch also records the emulated current device (see DeviceGuard).
#undef SWISK_LAUNCH
#define SWISK_LAUNCH(kernel, grid, block, stream, ...)                         \
  do {                                                                         \
    ::swisk::emu_cuda_device().last_launch = ::swisk::emu_cuda_device().current; \
    ::swisk::emu::launch((grid), (block), [&] { kernel(__VA_ARGS__); });       \
  } while (0)
#define SWISK_LAUNCH_SHARED(kernel, grid, block, bytes, stream, ...)                                            \
  do {                                                                                                        \
    ::swisk::emu_cuda_device().last_launch = ::swisk::emu_cuda_device().current;                                \
    ::swisk::emu::launch((grid), (block), [&] { kernel(__VA_ARGS__); }, ::swisk::emu::Target::cuda_sm90, (bytes)); \
  } while (0)
namespace swisk::cuda_emu {
inline void check_usable(const char*) {}
inline int current_device(const char*) { return emu_cuda_device().current; }
inline void set_device(const char*, int device) { emu_cuda_device().current = device; }
}  // namespace swisk::cuda_emu
#endif

namespace swisk::SWISK_CUDA_NS {

__device__ __forceinline__ SkIdx cuda_idx() {
  return SkIdx{threadIdx.x, threadIdx.y, blockIdx.x, blockIdx.y, blockDim.x, blockDim.y, gridDim.x, gridDim.y};
}

// Every launch path runs under one: makes the device of the op's tensors current and restores the
// caller's device on exit (cudaGetDevice / cudaSetDevice only, no synchronisation).
class DeviceGuard {
 public:
  DeviceGuard(const char* op, const TensorView& t) : op_(op), device_(t.device_index) {
    check_usable(op);
    prev_ = current_device(op);
    if (prev_ != device_) set_device(op, device_);
  }
  ~DeviceGuard() {
    if (prev_ == device_) return;
    try {
      set_device(op_, prev_);
    } catch (...) {  // a destructor must not throw; the next CUDA call reports the error
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  const char* op_;
  int device_, prev_ = 0;
};

inline dim3 to_dim3(SkGrid g) { return dim3(g.x, g.y); }

using ::swisk::gpu_float_only;

}  // namespace swisk::SWISK_CUDA_NS
