// Run-time ISA dispatch of the CPU hot loops: one clone per x86-64 ISA level (AVX-512, AVX2+FMA) and a
// baseline. The KAN kernels (cpu/kan.cpp, kan_backward.cpp) are built twice where clones are: in
// 32-byte vectors with AVX2 and baseline clones, and in 64-byte vectors (cpu/wide/) with AVX-512 and
// baseline ones; kan_vector_bytes picks one build per process. ISA levels, not "arch=haswell": GCC
// dispatches an arch= clone on the CPU model, so an AMD CPU got the baseline. Not under sanitizers: their runtimes are not up when the loader runs the
// clones' ifunc resolvers. SK_CLONES_FLAT also inlines everything the function calls.
#pragma once

#include <cstdlib>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && !defined(SWISK_SANITIZE)
#define SK_CLONES_ACTIVE 1
#if SK_VEC_BYTES == 64  // the AVX-512 twin (cpu/wide/); its baseline clone lets tests run it anywhere
#define SK_CLONE_LIST "arch=x86-64-v4", "default"
#elif defined(SK_WIDE_TWIN)  // a file cpu/wide/ builds again for AVX-512 CPUs
#define SK_CLONE_LIST "arch=x86-64-v3", "default"
#else
#define SK_CLONE_LIST "arch=x86-64-v4", "arch=x86-64-v3", "default"
#endif
#define SK_CLONES __attribute__((target_clones(SK_CLONE_LIST)))
#define SK_CLONES_FLAT __attribute__((target_clones(SK_CLONE_LIST), flatten))
#elif defined(__GNUC__)  // one build (clang, other CPUs, sanitizers): still everything inlined
#define SK_CLONES
#define SK_CLONES_FLAT __attribute__((flatten))
#else
#define SK_CLONES
#define SK_CLONES_FLAT
#endif

namespace swisk::cpu {

// The instruction set of the clone the ifunc resolvers pick here: "avx512" (x86-64-v4), "avx2"
// (x86-64-v3) or "baseline" (other x86-64 CPUs; builds without clones: other architectures, sanitizers).
inline const char* clone_isa() {
#ifdef SK_CLONES_ACTIVE
  if (__builtin_cpu_supports("x86-64-v4")) return "avx512";
  if (__builtin_cpu_supports("x86-64-v3")) return "avx2";
#endif
  return "baseline";
}

// The vector registers (of 32 bytes) the running clone has, which size register tiles: 32 with
// AVX-512 (ymm0-31), else 16 (AVX2; NEON's 32 registers hold 16 such vectors). SWISK_CPU_VEC_REGISTERS
// (16 or 32) overrides it, so that tests run either tiling on any CPU.
inline int vec_registers() {
  static const int n = [] {
    const char* e = std::getenv("SWISK_CPU_VEC_REGISTERS");
    if (e && (std::string(e) == "16" || std::string(e) == "32")) return std::atoi(e);
    return std::string(clone_isa()) == "avx512" ? 32 : 16;
  }();
  return n;
}

// The vector bytes of the KAN kernels this process runs: 64 where the build has the AVX-512 twin
// (SWISK_CPU_WIDE) and the CPU runs the AVX-512 clones, else 32. SWISK_CPU_VEC_BYTES (32 or 64)
// overrides it; 64 on a CPU without AVX-512 runs the twin's baseline clone (tests: its logic, slowly).
inline int kan_vector_bytes() {
  static const int n = [] {
#ifdef SWISK_CPU_WIDE
    const char* e = std::getenv("SWISK_CPU_VEC_BYTES");
    if (e && (std::string(e) == "32" || std::string(e) == "64")) return std::atoi(e);
    return std::string(clone_isa()) == "avx512" ? 64 : 32;
#else
    return 32;
#endif
  }();
  return n;
}

}  // namespace swisk::cpu
