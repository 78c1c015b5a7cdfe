// The CUDA backend: registration, device queries, the device guard's calls and launch checks.
#include <mutex>
#include <string>
#include <vector>

#include "launch.h"

namespace swisk {
namespace cuda_backend {

void register_bspline(Registry& r, Backend b);
void register_kan(Registry& r, Backend b);
void register_wavelet(Registry& r, Backend b);
void register_sketch(Registry& r, Backend b);

namespace {

// What this process's CUDA can do, asked once: versions, devices and why it cannot run (or "").
struct RuntimeFacts {
  int driver = 0, runtime = 0, devices = 0;
  std::string problem;
};

const RuntimeFacts& facts() {
  static const RuntimeFacts f = [] {
    RuntimeFacts r;
    if (cudaDriverGetVersion(&r.driver) != cudaSuccess) r.driver = 0;  // 0: no driver installed
    if (cudaRuntimeGetVersion(&r.runtime) != cudaSuccess) r.runtime = CUDART_VERSION;
    if (cudaGetDeviceCount(&r.devices) != cudaSuccess) r.devices = 0;
    cudaGetLastError();  // an old driver or no device leaves a sticky error: clear it
    r.problem = cuda_version_problem(r.driver, r.runtime, r.devices);
    return r;
  }();
  return f;
}

[[noreturn]] void fail_cuda(const char* op, const char* call, cudaError_t err) {
  fail(ErrorKind::runtime, op, "device", call, " failed: ", cudaGetErrorString(err));
}

}  // namespace

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(ErrorKind::runtime, std::string("[cuda] ") + what + ": launch failed: " + cudaGetErrorString(err));
}

void allow_shared(const void* kernel, size_t bytes, const char* what) {
  if (bytes <= 48 * 1024) return;
  struct Allowed {
    const void* kernel;
    int device;
    size_t bytes;
  };
  static std::mutex m;
  static std::vector<Allowed> done;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  std::lock_guard<std::mutex> lock(m);
  for (const Allowed& a : done)
    if (a.kernel == kernel && a.device == device && a.bytes >= bytes) return;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (err != cudaSuccess)
    throw Error(ErrorKind::runtime, std::string("[cuda] ") + what + ": " + std::to_string(bytes) +
                                        " bytes of shared memory refused: " + cudaGetErrorString(err));
  done.push_back({kernel, device, bytes});
}

void check_usable(const char* op) {
  const RuntimeFacts& f = facts();
  if (!f.problem.empty())
    fail(ErrorKind::runtime, op, "device", "the CUDA backend cannot run here: ", f.problem, " (driver API ", f.driver,
         ", runtime ", f.runtime, ")");
}

int current_device(const char* op) {
  int d = 0;
  if (const cudaError_t err = cudaGetDevice(&d); err != cudaSuccess) fail_cuda(op, "cudaGetDevice", err);
  return d;
}

void set_device(const char* op, int device) {
  if (const cudaError_t err = cudaSetDevice(device); err != cudaSuccess) fail_cuda(op, "cudaSetDevice", err);
}


}  // namespace cuda_backend

void register_cuda_backend(Registry& r) {
  cuda_backend::register_bspline(r, Backend::cuda);
  cuda_backend::register_kan(r, Backend::cuda);
  cuda_backend::register_wavelet(r, Backend::cuda);
  cuda_backend::register_sketch(r, Backend::cuda);
}

bool cuda_compiled() { return true; }
int cuda_device_count() { return cuda_backend::facts().problem.empty() ? cuda_backend::facts().devices : 0; }
int cuda_driver_version() { return cuda_backend::facts().driver; }
int cuda_runtime_version() { return cuda_backend::facts().runtime; }
std::string cuda_unusable_reason() { return cuda_backend::facts().problem; }
std::string cuda_archs() { return SWISK_CUDA_ARCHS_STR; }

}  // namespace swisk
