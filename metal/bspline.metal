// Metal entry points of the B-spline expansion kernels (bodies: swisk/kernels/bspline_tiled.h), one per
// register bucket M (bspline_gpu_bucket) and dtype.
#include "swisk/kernels/bspline_tiled.h"
#include "swisk/kernels/metal_entry.h"

template <sk_i32 M, typename T>
kernel void bspline_expand_k(device const T* x [[buffer(0)]], device const T* grid [[buffer(1)]],
                             device T* out [[buffer(2)]], constant BsplineParams& p [[buffer(3)]],
                             SWISK_METAL_COORDS) {
  SWISK_SHARED(typename sk_acc<T>::type, stage, SWISK_BSPLINE_STAGE);
  bspline_expand_staged_body<M, T>(SWISK_METAL_IDX, p, x, grid, out, stage);
}

template <sk_i32 M, typename T>
kernel void bspline_contract_k(device const T* x [[buffer(0)]], device const T* grid [[buffer(1)]],
                               device const T* grad [[buffer(2)]], device T* grad_x [[buffer(3)]],
                               constant BsplineParams& p [[buffer(4)]], SWISK_METAL_COORDS) {
  SWISK_SHARED(typename sk_acc<T>::type, stage, SWISK_BSPLINE_STAGE);
  bspline_contract_staged_body<M, T>(SWISK_METAL_IDX, p, x, grid, grad, grad_x, stage);
}

#define SWISK_INSTANTIATE_M(M, T, S)                                                                     \
  template SWISK_HOST_NAME("swisk_bspline_expand_m" #M "_" #S) kernel void bspline_expand_k<M, T>(      \
      device const T*, device const T*, device T*, constant BsplineParams&, SWISK_METAL_COORD_TYPES);    \
  template SWISK_HOST_NAME("swisk_bspline_contract_m" #M "_" #S) kernel void bspline_contract_k<M, T>(  \
      device const T*, device const T*, device const T*, device T*, constant BsplineParams&,             \
      SWISK_METAL_COORD_TYPES);
#define SWISK_INSTANTIATE(T, S) SWISK_INSTANTIATE_M(3, T, S) SWISK_INSTANTIATE_M(7, T, S) SWISK_INSTANTIATE_M(15, T, S)
SWISK_INSTANTIATE(float, f32)
SWISK_INSTANTIATE(half, f16)
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310  // bfloat needs MSL 3.1
SWISK_INSTANTIATE(bfloat, bf16)
#endif
#undef SWISK_INSTANTIATE
#undef SWISK_INSTANTIATE_M
