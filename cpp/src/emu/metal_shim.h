// Lets the emitted Metal source compile as C++ and run on the emulator: the Metal keywords, types
// and builtins the kernels use, mapped onto host code.
#pragma once

#include <cmath>

#include "emu/emulator.h"
#include "swisk/kernels/host_half.h"

#define SWISK_METAL_EMU 1
#define kernel
#define device
#define threadgroup
#define constant const
#define thread

typedef unsigned int uint;
typedef unsigned long ulong;
typedef ::swisk::f16 half;
typedef ::swisk::bf16 bfloat;
struct uint3 {
  uint x = 0, y = 0, z = 0;
};

enum class mem_flags { mem_none, mem_device, mem_threadgroup };
inline void threadgroup_barrier(mem_flags) { ::swisk::emu::barrier(); }

namespace metal {
inline float fabs(float x) { return std::fabs(x); }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isinf(float x) { return std::isinf(x); }
namespace precise {
inline float exp(float x) { return std::exp(x); }
inline float exp2(float x) { return std::exp2(x); }
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
