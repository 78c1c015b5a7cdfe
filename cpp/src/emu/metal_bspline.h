// Emulator thunks of the Metal B-spline kernels: buffers and parameter bytes -> the entry point.
#pragma once

template <typename T>
void bspline_basis_thunk(void* const* b, const void* p) {
  bspline_basis_k<T>((const T*)b[0], (const T*)b[1], (T*)b[2], *(const BsplineParams*)p, SWISK_COORDS);
}

template <typename T>
void bspline_basis_backward_thunk(void* const* b, const void* p) {
  bspline_basis_backward_k<T>((const T*)b[0], (const T*)b[1], (const T*)b[2], (T*)b[3], *(const BsplineParams*)p,
                              SWISK_COORDS);
}

#define SWISK_METAL_BSPLINE_KERNELS                               \
  SWISK_EMU_KERNEL(bspline_basis, bspline_basis_thunk),           \
      SWISK_EMU_KERNEL(bspline_basis_backward, bspline_basis_backward_thunk)
