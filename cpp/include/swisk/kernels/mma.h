// Warp-level 16x16x16 matrix multiply-accumulate on shared-memory tiles: tensor cores (WMMA) under
// nvcc, a per-lane scalar twin on the emulator with the same contract, so the kernels around it run
// and are tested here. A: row-major 16x16 (lda), B: column-major 16x16 (ldb), C: fp32.
// fp16/bf16 operands, or fp32 operands rounded to tf32 (two k=8 steps).
// Pointers must be 32-byte aligned and leading dimensions multiples of 8 (WMMA's rules).
#pragma once

#include "swisk/kernels/dialect.h"

#if defined(SWISK_DIALECT_CUDA)
#include <mma.h>

template <typename T>
struct SkMmaAcc {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
};
template <>
struct SkMmaAcc<float> {  // tf32 runs m16n16k8
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> f;
};

template <typename T>
SWISK_FN void sk_mma_zero(SkMmaAcc<T>& c) { nvcuda::wmma::fill_fragment(c.f, 0.0f); }

// c += a * b for the warp; every lane of the warp calls it (lane is unused on the GPU).
template <typename T>
SWISK_FN void sk_mma(SkMmaAcc<T>& c, const T* a, sk_u32 lda, const T* b, sk_u32 ldb, sk_u32 lane) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
  wmma::load_matrix_sync(fa, a, lda);
  wmma::load_matrix_sync(fb, b, ldb);
  wmma::mma_sync(c.f, fa, fb, c.f);
}

template <>
SWISK_FN void sk_mma<float>(SkMmaAcc<float>& c, const float* a, sk_u32 lda, const float* b, sk_u32 ldb, sk_u32 lane) {
  using namespace nvcuda;
  for (sk_u32 k = 0; k < 16; k += 8) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::load_matrix_sync(fa, a + k, lda);
    wmma::load_matrix_sync(fb, b + k, ldb);
    for (int t = 0; t < fa.num_elements; ++t) fa.x[t] = wmma::__float_to_tf32(fa.x[t]);
    for (int t = 0; t < fb.num_elements; ++t) fb.x[t] = wmma::__float_to_tf32(fb.x[t]);
    wmma::mma_sync(c.f, fa, fb, c.f);
  }
}

// Writes the 16x16 accumulator row-major into c (ldc).
template <typename T>
SWISK_FN void sk_mma_store(float* c, sk_u32 ldc, const SkMmaAcc<T>& acc, sk_u32 lane) {
  nvcuda::wmma::store_matrix_sync(c, acc.f, ldc, nvcuda::wmma::mem_row_major);
}

#elif defined(SWISK_DIALECT_CPP)

// Lane l owns elements e = l + 32 t (t < 8) of the 16x16 tile: row e / 16, column e % 16.
template <typename T>
struct SkMmaAcc {
  float v[8];
};

template <typename T>
SWISK_FN void sk_mma_zero(SkMmaAcc<T>& c) {
  for (int t = 0; t < 8; ++t) c.v[t] = 0.0f;
}

// An operand as the matrix unit sees it: 16-bit values as they are, fp32 rounded to tf32
// (10 mantissa bits, to nearest, ties away from zero).
template <typename T>
SWISK_FN float sk_mma_operand(T v) {
  return float(v);
}
template <>
SWISK_FN float sk_mma_operand<float>(float v) {
  if (sk_isnan(v) || sk_isinf(v)) return v;
  return ::swisk::bits_float((::swisk::float_bits(v) + 0x1000u) & 0xffffe000u);
}

template <typename T>
SWISK_FN void sk_mma(SkMmaAcc<T>& c, const T* a, sk_u32 lda, const T* b, sk_u32 ldb, sk_u32 lane) {
  for (sk_u32 t = 0; t < 8; ++t) {
    const sk_u32 e = lane + 32 * t, r = e / 16, col = e % 16;
    float s = 0.0f;
    for (sk_u32 k = 0; k < 16; ++k) s += sk_mma_operand(a[r * lda + k]) * sk_mma_operand(b[col * ldb + k]);
    c.v[t] += s;
  }
}

template <typename T>
SWISK_FN void sk_mma_store(float* c, sk_u32 ldc, const SkMmaAcc<T>& acc, sk_u32 lane) {
  for (sk_u32 t = 0; t < 8; ++t) {
    const sk_u32 e = lane + 32 * t;
    c[(e / 16) * ldc + e % 16] = acc.v[t];
  }
}

#endif
