// One registry maps (op, backend) to a kernel and its supports() predicate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "swisk/error.h"
#include "swisk/tensor.h"

namespace swisk {

// cuda_emu / metal_emu run the CUDA and Metal kernel bodies on the CPU emulator (tests).
enum class Backend : int { cpu = 0, cuda = 1, metal = 2, cuda_emu = 3, metal_emu = 4 };
constexpr int kNumBackends = 5;

const char* backend_name(Backend b);
Backend backend_from_name(const std::string& name);  // "cpu", "cuda", "mps", "cuda-emu", "metal-emu"
Device backend_device(Backend b);                     // where the backend's tensors live

// One Metal kernel dispatch, decided in C++: Python (or the emulator) binds buffers[k], a position in
// the op's tensor list, to slot k, the parameter bytes to the next slot, and dispatches.
struct MetalDispatch {
  std::string kernel;
  uint32_t grid[3] = {1, 1, 1};         // threadgroups per grid
  uint32_t threadgroup[3] = {1, 1, 1};  // threads per threadgroup
  std::vector<uint8_t> params;          // bound after the tensors
  std::vector<int> buffers;             // positions in the op's tensor list, in slot order
};

// How an op call runs: on which backend, on which CUDA stream; Metal appends its dispatches.
struct Launch {
  Backend backend = Backend::cpu;
  void* stream = nullptr;
  std::vector<MetalDispatch>* dispatches = nullptr;
};

class Registry {
 public:
  template <class Args>
  void add(const char* op, Backend b, void (*fn)(const Args&), const char* (*supports)(const Args&) = nullptr) {
    add_erased(op, b, tag<Args>(), reinterpret_cast<void (*)()>(fn), reinterpret_cast<void (*)()>(supports));
  }
  // The kernel of op on backend b for these arguments; unknown or unsupported combinations raise, in
  // the name of the public op (name; op when null) and its argument x.
  template <class Args>
  auto kernel(const char* op, Backend b, const Args& args, const char* name = nullptr) const
      -> void (*)(const Args&) {
    const Entry& e = find(op, b, tag<Args>());
    if (e.supports) {
      auto sup = reinterpret_cast<const char* (*)(const Args&)>(e.supports);
      if (const char* why = sup(args)) fail(ErrorKind::type, name ? name : op, "x", why, " on backend ", backend_name(b));
    }
    return reinterpret_cast<void (*)(const Args&)>(e.fn);
  }
  // Straight to the kernel on args.launch.backend, past every frontend check (tests).
  template <class Args>
  void run(const char* op, const Args& args) const {
    kernel(op, args.launch.backend, args)(args);
  }
  bool has(const std::string& op, Backend b) const;
  std::vector<std::string> ops() const;

 private:
  struct Entry {
    std::string op;
    Backend backend;
    const void* tag;
    void (*fn)();
    void (*supports)();
  };
  template <class Args>
  static const void* tag() {
    static const char t = 0;
    return &t;
  }
  void add_erased(const char* op, Backend b, const void* tag, void (*fn)(), void (*supports)());
  const Entry& find(const char* op, Backend b, const void* tag) const;
  std::vector<Entry> entries_;
};

Registry& registry();

// Each backend registers its kernels; a backend that is not built registers nothing.
void register_cpu_backend(Registry& r);
void register_cuda_backend(Registry& r);
void register_cuda_emu_backend(Registry& r);
void register_metal_backend(Registry& r);
void register_metal_emu_backend(Registry& r);

// Runtime facts of the CUDA backend (0 / false when it is not built or no driver is present).
bool cuda_compiled();
int cuda_device_count();
int cuda_driver_version();   // cudaDriverGetVersion (13000 = CUDA 13.0); 0 without a driver
int cuda_runtime_version();  // cudaRuntimeGetVersion of the runtime swisk links
std::string cuda_unusable_reason();  // why CUDA ops cannot run here, "" when they can
std::string cuda_archs();

// The OpenMP runtime the CPU backend's parallel loops run on (the one already in the process: torch's),
// "" when none was found and they run serially.
std::string openmp_runtime();
int cpu_threads();  // threads a CPU kernel would use now: torch.get_num_threads() when it is torch's runtime
// The instruction set the CPU kernels' clones run with here: "avx512", "avx2" (x86-64-v4 / v3), or
// "baseline" (other x86-64 CPUs, and builds without clones: other architectures, sanitizers).
std::string cpu_isa();
// The CPU's vendor: "intel", "amd", or "" where unknown (other architectures and compilers).
std::string cpu_vendor();
// The vector bytes of the CPU KAN kernels here: 64 (their AVX-512 build) or 32 (cpu/clones.h).
int cpu_vector_bytes();

}  // namespace swisk
