// Run-time ISA dispatch of the CPU hot loops: one clone per x86-64 ISA level (AVX-512, AVX2+FMA) and a
// baseline. ISA levels, not "arch=haswell": GCC dispatches an arch= clone on the CPU model, so an AMD
// CPU got the baseline. Not under sanitizers: their runtimes are not up when the loader runs the
// clones' ifunc resolvers. SK_CLONES_FLAT also inlines everything the function calls.
#pragma once

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

// The vector registers (of 32 bytes) the running clone has, which size register tiles: 32 with
// AVX-512 (ymm0-31), else 16 (AVX2; NEON's 32 registers hold 16 such vectors).
inline int vec_registers() {
#ifdef SK_CLONES_ACTIVE
  static const int n = __builtin_cpu_supports("x86-64-v4") ? 32 : 16;  // the clone the resolver picks
  return n;
#else
  return 16;
#endif
}
