// Emulator thunks of the Metal B-spline kernels: buffers and parameter bytes -> the entry point.
#pragma once

template <sk_i32 M>
struct BsplineThunks {
  template <typename T>
  static void expand(void* const* b, const void* p) {
    bspline_expand_k<M, T>((const T*)b[0], (const T*)b[1], (T*)b[2], *(const BsplineParams*)p, SWISK_COORDS);
  }
  template <typename T>
  static void contract(void* const* b, const void* p) {
    bspline_contract_k<M, T>((const T*)b[0], (const T*)b[1], (const T*)b[2], (T*)b[3], *(const BsplineParams*)p,
                             SWISK_COORDS);
  }
};

#define SWISK_METAL_BSPLINE_BUCKET(M)                                     \
  SWISK_EMU_KERNEL(bspline_expand_m##M, BsplineThunks<M>::template expand), \
      SWISK_EMU_KERNEL(bspline_contract_m##M, BsplineThunks<M>::template contract)
#define SWISK_METAL_BSPLINE_KERNELS \
  SWISK_METAL_BSPLINE_BUCKET(3), SWISK_METAL_BSPLINE_BUCKET(7), SWISK_METAL_BSPLINE_BUCKET(15)
