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
// time, so a function-local static is exactly one block's shared memory there; it counts each array
// against the target's limit and poisons it before every block (emu/emulator.h, via the shims).
// SWISK_SHARED_ALIGNED adds the 32-byte alignment that matrix-unit loads need. SWISK_SHARED_DYNAMIC is
// CUDA's dynamic shared memory (past the 48 KiB of static arrays): n elements that the launch must give
// (SWISK_LAUNCH_SHARED; the emulator checks the two agree); one per kernel, 16-byte aligned.
#if defined(SWISK_EMULATED)
#define SWISK_SHARED(T, name, n) SWISK_EMU_SHARED(SWISK_TG T, name, n, alignof(T))
#define SWISK_SHARED_ALIGNED(T, name, n) SWISK_EMU_SHARED(SWISK_TG T, name, n, 32)
#define SWISK_SHARED_DYNAMIC(T, name, n) SWISK_EMU_SHARED_DYNAMIC(SWISK_TG T, name, n)
#elif defined(__METAL_VERSION__)
#define SWISK_SHARED(T, name, n) threadgroup T name[n]
#define SWISK_SHARED_ALIGNED(T, name, n) threadgroup T name[n]
#elif defined(SWISK_DIALECT_CUDA)
#define SWISK_SHARED(T, name, n) __shared__ T name[n]
#define SWISK_SHARED_ALIGNED(T, name, n) __shared__ __align__(32) T name[n]
#define SWISK_SHARED_DYNAMIC(T, name, n)              \
  extern __shared__ __align__(16) unsigned char sk_dynamic_shared[]; \
  T* name = reinterpret_cast<T*>(sk_dynamic_shared)
#endif

// Fully unrolls a fixed-count loop over a register tile (so its arrays stay in registers on CUDA).
#if defined(SWISK_DIALECT_CUDA)
#define SWISK_UNROLL _Pragma("unroll")
#else
#define SWISK_UNROLL
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

// A launch grid of (x, y) tiles within CUDA's limits (gridDim.x < 2^31, gridDim.y <= 65535): the tiled
// bodies loop over tiles in both dimensions, so a capped grid still covers every tile.
struct SkGrid {
  sk_u32 x, y;
};
SWISK_HD SkGrid sk_tile_grid(sk_u64 x_tiles, sk_u64 y_tiles) {
  const sk_u64 cx = sk_u64(0x7fffffff), cy = sk_u64(65535);
  SkGrid g;
  g.x = sk_u32(x_tiles == 0 ? 1 : (x_tiles > cx ? cx : x_tiles));
  g.y = sk_u32(y_tiles == 0 ? 1 : (y_tiles > cy ? cy : y_tiles));
  return g;
}
SWISK_HD sk_u64 sk_tiles(sk_u64 n, sk_u32 tile) { return (n + tile - 1) / tile; }
// A 1-D grid-stride launch over n items, `threads` per block: at most 4096 blocks (the bodies loop).
#define SWISK_STRIDE_THREADS 256
SWISK_HD SkGrid sk_stride_grid(sk_u64 n) {
  const sk_u64 blocks = sk_tiles(n, SWISK_STRIDE_THREADS);
  return sk_tile_grid(blocks > 4096 ? 4096 : blocks, 1);
}

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
SWISK_FN float sk_log(float x) { return metal::precise::log(x); }
SWISK_FN float sk_sinpi(float x) { return metal::precise::sinpi(x); }
SWISK_FN float sk_cospi(float x) { return metal::precise::cospi(x); }
SWISK_FN float sk_cos(float x) { return metal::precise::cos(x); }
SWISK_FN float sk_sin(float x) { return metal::precise::sin(x); }
SWISK_FN float sk_sqrt(float x) { return metal::precise::sqrt(x); }
SWISK_FN float sk_rint(float x) { return metal::rint(x); }
SWISK_FN float sk_fma(float a, float b, float c) { return metal::fma(a, b, c); }
SWISK_FN sk_u32 sk_float_bits(float x) { return as_type<uint>(x); }
SWISK_FN float sk_bits_float(sk_u32 u) { return as_type<float>(u); }
SWISK_FN float sk_abs(float x) { return metal::fabs(x); }
SWISK_FN bool sk_isnan(float x) { return metal::isnan(x); }
SWISK_FN bool sk_isinf(float x) { return metal::isinf(x); }
SWISK_FN float sk_nan(float) { return NAN; }
#elif defined(SWISK_DIALECT_CUDA)
SWISK_FN float sk_exp(float x) { return ::expf(x); }
SWISK_FN float sk_exp2(float x) { return ::exp2f(x); }
SWISK_FN float sk_log(float x) { return ::logf(x); }
SWISK_FN float sk_sinpi(float x) { return ::sinpif(x); }
SWISK_FN float sk_cospi(float x) { return ::cospif(x); }
SWISK_FN float sk_rint(float x) { return ::rintf(x); }
SWISK_FN float sk_fma(float a, float b, float c) { return ::fmaf(a, b, c); }
SWISK_FN sk_u32 sk_float_bits(float x) { return __float_as_uint(x); }
SWISK_FN float sk_bits_float(sk_u32 u) { return __uint_as_float(u); }
SWISK_FN float sk_sqrt(float x) { return ::sqrtf(x); }
SWISK_FN float sk_abs(float x) { return ::fabsf(x); }
SWISK_FN bool sk_isnan(float x) { return ::isnan(x); }
SWISK_FN bool sk_isinf(float x) { return ::isinf(x); }
SWISK_FN float sk_nan(float) { return __int_as_float(0x7fc00000); }
#else
#include "swisk/kernels/host_math.h"  // float and double overloads over <cmath>
inline sk_u32 sk_float_bits(float x) {
  sk_u32 u;
  __builtin_memcpy(&u, &x, 4);
  return u;
}
inline float sk_bits_float(sk_u32 u) {
  float x;
  __builtin_memcpy(&x, &u, 4);
  return x;
}
#endif

#if !defined(SWISK_DIALECT_METAL)
// sin and cos in fp32 only (CUDA's sinf/cosf carry an fp64 slow path for |x| > 105615): x = q·π/2 + r
// with π/2 in three fp32 parts through fma, |r| <= π/4, then Taylor series to r^9 / r^10, whose
// truncation (< 3e-9) is below fp32 rounding: absolute error < 1e-7 for |x| < 1e6. Past that (fp32
// spacing >= 0.06) sinpi/cospi of x/π: bounded, with a phase error of about 6e-8·|x|; inf, NaN: NaN.
struct SkSinCos {
  float s, c;
};
SWISK_FN SkSinCos sk_sincos_f32(float x) {
  SkSinCos o;
  if (!(sk_abs(x) < 1.0e6f)) {
    o.s = sk_sinpi(x * 3.183098733e-01f);
    o.c = sk_cospi(x * 3.183098733e-01f);
    return o;
  }
  const float q = sk_rint(x * 6.366197467e-01f);
  float r = sk_fma(q, -1.570796371e+00f, x);
  r = sk_fma(q, 4.371138829e-08f, r);
  r = sk_fma(q, 1.715124510e-15f, r);
  const float r2 = r * r;
  const float s = r + r * r2 * (-1.0f / 6 + r2 * (1.0f / 120 + r2 * (-1.0f / 5040 + r2 * (1.0f / 362880))));
  const float c =
      1.0f + r2 * (-0.5f + r2 * (1.0f / 24 + r2 * (-1.0f / 720 + r2 * (1.0f / 40320 + r2 * (-1.0f / 3628800)))));
  const float qm = q - 4.0f * sk_rint(q * 0.25f);  // q mod 4 in [-2, 2], exact
  const sk_i32 quad = (sk_i32(qm) + 4) & 3;
  o.s = quad == 0 ? s : (quad == 1 ? c : (quad == 2 ? -s : -c));
  o.c = quad == 0 ? c : (quad == 1 ? -s : (quad == 2 ? -c : s));
  return o;
}
#endif
#if defined(SWISK_DIALECT_CUDA)
SWISK_FN float sk_sin(float x) { return sk_sincos_f32(x).s; }
SWISK_FN float sk_cos(float x) { return sk_sincos_f32(x).c; }
#endif
