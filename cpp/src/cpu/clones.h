// Run-time ISA dispatch of the CPU hot loops: one clone per x86-64 ISA level (AVX-512, AVX2+FMA) and a
// baseline. ISA levels, not "arch=haswell": GCC dispatches an arch= clone on the CPU model, so an AMD
// CPU got the baseline. Not under sanitizers: their runtimes are not up when the loader runs the
// clones' ifunc resolvers. SK_CLONES_FLAT also inlines everything the function calls.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__) && !defined(SWISK_SANITIZE)
#define SK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define SK_CLONES_FLAT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#elif defined(__GNUC__)  // one build (clang, other CPUs, sanitizers): still everything inlined
#define SK_CLONES
#define SK_CLONES_FLAT __attribute__((flatten))
#else
#define SK_CLONES
#define SK_CLONES_FLAT
#endif
