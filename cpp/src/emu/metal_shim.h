// Lets the emitted Metal source compile as C++ and run on the emulator: the Metal keywords, types
// and builtins the kernels use, mapped onto host code.
#pragma once

#include <cmath>

#include "emu/emulator.h"
#include "swisk/kernels/host_half.h"

#define SWISK_METAL_EMU 1
#define kernel
#define thread
#if defined(SWISK_METAL_ADDRESS_SPACES)
// clang only (a syntax check, not run): Metal's address spaces, so a pointer that lacks or changes
// its device/threadgroup/constant qualifier fails to compile here as it would with the Metal compiler.
#define device __attribute__((address_space(1)))
#define constant const __attribute__((address_space(2)))
#define threadgroup __attribute__((address_space(3)))
#else
#define device
#define threadgroup
#define constant const
#endif

typedef unsigned int uint;
typedef unsigned long ulong;
#if defined(SWISK_METAL_ADDRESS_SPACES)
typedef __fp16 half;  // syntax check only: distinct scalar stand-ins, readable from any address space
typedef double bfloat;
#else
typedef ::swisk::f16 half;
typedef ::swisk::bf16 bfloat;
#endif
struct uint3 {
  uint x = 0, y = 0, z = 0;
};

enum class mem_flags { mem_none, mem_device, mem_threadgroup };
inline void threadgroup_barrier(mem_flags) { ::swisk::emu::barrier(); }

template <typename To, typename From>
inline To as_type(From x) {
  static_assert(sizeof(To) == sizeof(From), "as_type: sizes differ");
  To y;
  __builtin_memcpy(&y, &x, sizeof(To));
  return y;
}

namespace metal {
inline float fabs(float x) { return std::fabs(x); }
inline float rint(float x) { return std::rint(x); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isinf(float x) { return std::isinf(x); }
namespace precise {
inline float exp(float x) { return std::exp(x); }
inline float exp2(float x) { return std::exp2(x); }
inline float log(float x) { return std::log(x); }
inline float sinpi(float x) { return float(std::sin(3.14159265358979323846 * double(x))); }
inline float cospi(float x) { return float(std::cos(3.14159265358979323846 * double(x))); }
inline float cos(float x) { return std::cos(x); }
inline float sin(float x) { return std::sin(x); }
inline float sqrt(float x) { return std::sqrt(x); }
}  // namespace precise
}  // namespace metal

#ifndef NAN
#define NAN (__builtin_nanf(""))
#endif

// The coordinates a Metal kernel receives through its attributes.
namespace swisk::emu {
inline uint3 metal_coord(const Dim3& d) { return uint3{d.x, d.y, d.z}; }
}  // namespace swisk::emu
