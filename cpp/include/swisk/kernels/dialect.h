// The kernel dialect: one language for CUDA, Metal and C++ (CPU backend and emulator).
// Shared kernel code uses only what this header defines; no <cmath>, no std::, no double on GPUs.
#pragma once

#if defined(__METAL_VERSION__) || defined(SWISK_METAL_EMU)
#define SWISK_DIALECT_METAL 1
#elif defined(__CUDACC__)
#define SWISK_DIALECT_CUDA 1
#else
#define SWISK_DIALECT_CPP 1  // CPU backend, CUDA emulator
#endif
#if defined(SWISK_METAL_EMU) || defined(SWISK_CUDA_EMU)
#define SWISK_EMULATED 1
#endif

// ---- qualifiers -------------------------------------------------------------------------------
#if defined(__METAL_VERSION__)
#include <metal_stdlib>
using namespace metal;
#endif

#if defined(SWISK_DIALECT_METAL)
#define SWISK_FN inline
#define SWISK_HD inline
#define SWISK_GLOBAL device      // pointer into device memory
#define SWISK_TG threadgroup     // pointer into threadgroup (shared) memory
#define SWISK_CONST constant     // kernel parameter structs (read-only)
#define SWISK_THREAD thread      // pointer into a thread's own memory
#define SWISK_TABLE constant     // constant lookup tables at file scope
#elif defined(SWISK_DIALECT_CUDA)
#define SWISK_FN __device__ __forceinline__
#define SWISK_HD __host__ __device__ __forceinline__  // also called by host launch code
#define SWISK_GLOBAL
#define SWISK_TG
#define SWISK_CONST const
#define SWISK_THREAD
#define SWISK_TABLE __device__ const
#else
#define SWISK_FN inline
#define SWISK_HD inline
#define SWISK_GLOBAL
#define SWISK_TG
#define SWISK_CONST const
#define SWISK_THREAD
#define SWISK_TABLE static const
#endif

// Shared (threadgroup) arrays are declared in kernel entry points. The emulator runs one block at a
// time, so a function-local static is exactly one block's shared memory there.
// SWISK_SHARED_ALIGNED adds the 32-byte alignment that matrix-unit loads need.
#if defined(SWISK_EMULATED)
#define SWISK_SHARED(T, name, n) static SWISK_TG T name[n]
#define SWISK_SHARED_ALIGNED(T, name, n) alignas(32) static SWISK_TG T name[n]
#elif defined(__METAL_VERSION__)
#define SWISK_SHARED(T, name, n) threadgroup T name[n]
#define SWISK_SHARED_ALIGNED(T, name, n) threadgroup T name[n]
#elif defined(SWISK_DIALECT_CUDA)
#define SWISK_SHARED(T, name, n) __shared__ T name[n]
#define SWISK_SHARED_ALIGNED(T, name, n) __shared__ __align__(32) T name[n]
#endif

#if defined(SWISK_DIALECT_METAL)
#define SWISK_BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup)
#elif defined(SWISK_DIALECT_CUDA) || defined(SWISK_CUDA_EMU)
#define SWISK_BARRIER() __syncthreads()
#endif

// ---- integer types ------------------------------------------------------------------------------
#if defined(__METAL_VERSION__)
typedef uint sk_u32;
typedef int sk_i32;
typedef ulong sk_u64;
typedef long sk_i64;
#else
typedef unsigned int sk_u32;
typedef int sk_i32;
typedef unsigned long long sk_u64;
typedef long long sk_i64;
#endif

// Thread and block coordinates, built by each backend's entry point (2-D is enough for our kernels).
struct SkIdx {
  sk_u32 tx, ty;    // thread in block
  sk_u32 bx, by;    // block in grid
  sk_u32 bdx, bdy;  // block size
  sk_u32 gdx, gdy;  // grid size in blocks
};

// ---- 16-bit floats on the host (CPU backend, emulator) ------------------------------------------
#if defined(SWISK_DIALECT_CPP) || defined(SWISK_METAL_EMU)
#include "swisk/kernels/host_half.h"
#endif
#if defined(SWISK_DIALECT_CUDA)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
typedef __half sk_half;
typedef __nv_bfloat16 sk_bfloat;
#elif defined(__METAL_VERSION__)
typedef half sk_half;
typedef bfloat sk_bfloat;
#else
typedef ::swisk::f16 sk_half;
typedef ::swisk::bf16 sk_bfloat;
#endif

// Accumulator type: fp32 for every storage type but fp64 (which only the CPU has).
template <typename T>
struct sk_acc {
  typedef float type;
};
#if !defined(SWISK_DIALECT_METAL)
template <>
struct sk_acc<double> {
  typedef double type;
};
#endif

// ---- math shim: the only place the kernels meet a math library ----------------------------------
#if defined(SWISK_DIALECT_METAL)
SWISK_FN float sk_exp(float x) { return metal::precise::exp(x); }
SWISK_FN float sk_exp2(float x) { return metal::precise::exp2(x); }
SWISK_FN float sk_sinpi(float x) { return metal::precise::sinpi(x); }
SWISK_FN float sk_cospi(float x) { return metal::precise::cospi(x); }
SWISK_FN float sk_cos(float x) { return metal::precise::cos(x); }
SWISK_FN float sk_sin(float x) { return metal::precise::sin(x); }
SWISK_FN float sk_sqrt(float x) { return metal::precise::sqrt(x); }
SWISK_FN float sk_abs(float x) { return metal::fabs(x); }
SWISK_FN bool sk_isnan(float x) { return metal::isnan(x); }
SWISK_FN bool sk_isinf(float x) { return metal::isinf(x); }
SWISK_FN float sk_nan(float) { return NAN; }
#elif defined(SWISK_DIALECT_CUDA)
SWISK_FN float sk_exp(float x) { return ::expf(x); }
SWISK_FN float sk_exp2(float x) { return ::exp2f(x); }
SWISK_FN float sk_sinpi(float x) { return ::sinpif(x); }
SWISK_FN float sk_cospi(float x) { return ::cospif(x); }
SWISK_FN float sk_cos(float x) { return ::cosf(x); }
SWISK_FN float sk_sin(float x) { return ::sinf(x); }
SWISK_FN float sk_sqrt(float x) { return ::sqrtf(x); }
SWISK_FN float sk_abs(float x) { return ::fabsf(x); }
SWISK_FN bool sk_isnan(float x) { return ::isnan(x); }
SWISK_FN bool sk_isinf(float x) { return ::isinf(x); }
SWISK_FN float sk_nan(float) { return __int_as_float(0x7fc00000); }
#else
#include "swisk/kernels/host_math.h"  // float and double overloads over <cmath>
#endif
