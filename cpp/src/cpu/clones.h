// Run-time ISA dispatch of the CPU hot loops: one clone per x86-64 ISA level (AVX-512, AVX2+FMA) and a
// baseline. ISA levels, not "arch=haswell": GCC dispatches an arch= clone on the CPU model, so an AMD
// CPU got the baseline. Not under sanitizers: their runtimes are not up when the loader runs the
// clones' ifunc resolvers. SK_CLONES_FLAT also inlines everything the function calls.
#pragma once

#include <cstdlib>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && !defined(SWISK_SANITIZE)
#define SK_CLONES_ACTIVE 1
#define SK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define SK_CLONES_FLAT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
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

}  // namespace swisk::cpu
