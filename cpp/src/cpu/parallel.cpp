// Finds the OpenMP runtime for parallel.h: one already loaded (torch loads libgomp.so.1 before swisk),
// else the system's libgomp; without one the loops run serially.
#include "parallel.h"

#include <string>

#include "clones.h"

#include "swisk/registry.h"

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#endif

namespace swisk::cpu {
namespace {

template <class Fn>
bool resolve(void* lib, const char* symbol, Fn& fn) {
#if defined(__unix__) || defined(__APPLE__)
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
#endif
  return fn != nullptr;
}

OpenMP find_openmp() {
  OpenMP o;
#if (defined(__unix__) || defined(__APPLE__)) && !defined(SWISK_SANITIZE_THREAD)
  static const char* const loaded[] = {"libgomp.so.1", "libomp.so", "libiomp5.so", "libomp.dylib", "libgomp.1.dylib"};
  void* lib = nullptr;
  for (const char* name : loaded) {
    if ((lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD))) { o.name = name; break; }
  }
  if (!lib && (lib = dlopen("libgomp.so.1", RTLD_NOW | RTLD_LOCAL))) o.name = "libgomp.so.1";
  if (!lib) return OpenMP{};
  const bool ok = resolve(lib, "GOMP_parallel", o.parallel) && resolve(lib, "omp_in_parallel", o.in_parallel) &&
                  resolve(lib, "omp_get_max_threads", o.max_threads) &&
                  resolve(lib, "omp_get_thread_num", o.thread_num) &&
                  resolve(lib, "omp_get_num_threads", o.num_threads);
  if (!ok) return OpenMP{};
#endif
  return o;
}

}  // namespace

const OpenMP& openmp() {
  static const OpenMP o = find_openmp();
  return o;
}

int max_threads() {
  const OpenMP& o = openmp();
  return o.max_threads ? o.max_threads() : 1;
}

}  // namespace swisk::cpu

namespace swisk {
std::string openmp_runtime() { return cpu::openmp().name; }
int cpu_threads() { return cpu::max_threads(); }
std::string cpu_isa() { return cpu::clone_isa(); }
// MKL's GEMM takes its AVX-512 kernels on Intel CPUs alone, which moves where the fused kernels win.
std::string cpu_vendor() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_is("intel")) return "intel";
  if (__builtin_cpu_is("amd")) return "amd";
#endif
  return "";
}
int cpu_vector_bytes() { return cpu::kan_vector_bytes(); }
}  // namespace swisk
