// Warp-level 16x16x16 matrix multiply-accumulate on shared-memory tiles: tensor cores (WMMA) under
// nvcc, a per-lane scalar twin on the emulator with the same contract, so the kernels around it run
// and are tested here. A: row-major 16x16 (lda), B: column-major 16x16 (ldb), C: fp32.
// Pointers must be 32-byte aligned and leading dimensions multiples of 8 (WMMA's rules).
#pragma once

#include "swisk/kernels/dialect.h"

#if defined(SWISK_DIALECT_CUDA)
#include <mma.h>

struct SkMmaAcc {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
};

SWISK_FN void sk_mma_zero(SkMmaAcc& c) { nvcuda::wmma::fill_fragment(c.f, 0.0f); }

// c += a * b for the warp; every lane of the warp calls it (lane is unused on the GPU).
template <typename T>
SWISK_FN void sk_mma(SkMmaAcc& c, const T* a, sk_u32 lda, const T* b, sk_u32 ldb, sk_u32 lane) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
  wmma::load_matrix_sync(fa, a, lda);
  wmma::load_matrix_sync(fb, b, ldb);
  wmma::mma_sync(c.f, fa, fb, c.f);
}

// Writes the 16x16 accumulator row-major into c (ldc).
SWISK_FN void sk_mma_store(float* c, sk_u32 ldc, const SkMmaAcc& acc, sk_u32 lane) {
  nvcuda::wmma::store_matrix_sync(c, acc.f, ldc, nvcuda::wmma::mem_row_major);
}

#elif defined(SWISK_DIALECT_CPP)

// Lane l owns elements e = l + 32 t (t < 8) of the 16x16 tile: row e / 16, column e % 16.
struct SkMmaAcc {
  float v[8];
};

SWISK_FN void sk_mma_zero(SkMmaAcc& c) {
  for (int t = 0; t < 8; ++t) c.v[t] = 0.0f;
}

template <typename T>
SWISK_FN void sk_mma(SkMmaAcc& c, const T* a, sk_u32 lda, const T* b, sk_u32 ldb, sk_u32 lane) {
  for (sk_u32 t = 0; t < 8; ++t) {
    const sk_u32 e = lane + 32 * t, r = e / 16, col = e % 16;
    float s = 0.0f;
    for (sk_u32 k = 0; k < 16; ++k) s += float(a[r * lda + k]) * float(b[col * ldb + k]);
    c.v[t] += s;
  }
}

SWISK_FN void sk_mma_store(float* c, sk_u32 ldc, const SkMmaAcc& acc, sk_u32 lane) {
  for (sk_u32 t = 0; t < 8; ++t) {
    const sk_u32 e = lane + 32 * t;
    c[(e / 16) * ldc + e % 16] = acc.v[t];
  }
}

#endif
