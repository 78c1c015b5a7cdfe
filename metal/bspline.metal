// Metal entry points of the B-spline basis kernels (bodies: swisk/kernels/bspline.h).
#include "swisk/kernels/bspline.h"
#include "swisk/kernels/metal_entry.h"

template <typename T>
kernel void bspline_basis_k(device const T* x [[buffer(0)]], device const T* grid [[buffer(1)]],
                            device T* out [[buffer(2)]], constant BsplineParams& p [[buffer(3)]],
                            SWISK_METAL_COORDS) {
  bspline_basis_body<T>(SWISK_METAL_IDX, p, x, grid, out);
}

template <typename T>
kernel void bspline_basis_backward_k(device const T* x [[buffer(0)]], device const T* grid [[buffer(1)]],
                                     device const T* grad_out [[buffer(2)]], device T* grad_x [[buffer(3)]],
                                     constant BsplineParams& p [[buffer(4)]], SWISK_METAL_COORDS) {
  bspline_basis_backward_body<T>(SWISK_METAL_IDX, p, x, grid, grad_out, grad_x);
}

#define SWISK_INSTANTIATE(T, S)                                                                           \
  template SWISK_HOST_NAME("swisk_bspline_basis_" #S) kernel void bspline_basis_k<T>(                    \
      device const T*, device const T*, device T*, constant BsplineParams&, SWISK_METAL_COORD_TYPES);     \
  template SWISK_HOST_NAME("swisk_bspline_basis_backward_" #S) kernel void bspline_basis_backward_k<T>(  \
      device const T*, device const T*, device const T*, device T*, constant BsplineParams&,              \
      SWISK_METAL_COORD_TYPES);
SWISK_INSTANTIATE(float, f32)
SWISK_INSTANTIATE(half, f16)
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310  // bfloat needs MSL 3.1
SWISK_INSTANTIATE(bfloat, bf16)
#endif
#undef SWISK_INSTANTIATE
