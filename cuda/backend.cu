// The CUDA backend: registration, device queries and launch checks.
#include <string>

#include "launch.h"

namespace swisk {
namespace cuda_backend {

void register_bspline(Registry& r, Backend b);
void register_kan(Registry& r, Backend b);
void register_wavelet(Registry& r, Backend b);

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(ErrorKind::runtime, std::string("[cuda] ") + what + ": launch failed: " + cudaGetErrorString(err));
}

}  // namespace cuda_backend

void register_cuda_backend(Registry& r) {
  cuda_backend::register_bspline(r, Backend::cuda);
  cuda_backend::register_kan(r, Backend::cuda);
  cuda_backend::register_wavelet(r, Backend::cuda);
}

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the sticky error and report none
    return 0;
  }
  return n;
}

std::string cuda_archs() { return SWISK_CUDA_ARCHS_STR; }

}  // namespace swisk
