// Metal entry points of the fused KAN linear kernels (bodies: swisk/kernels/kan.h).
#include "swisk/kernels/kan.h"
#include "swisk/kernels/metal_entry.h"

template <typename T>
kernel void kan_forward_k(device const T* x [[buffer(0)]], device const T* grid [[buffer(1)]],
                          device const T* bw [[buffer(2)]], device const T* sw [[buffer(3)]],
                          device const T* sc [[buffer(4)]], device T* y [[buffer(5)]],
                          constant KanParams& p [[buffer(6)]], SWISK_METAL_COORDS) {
  SWISK_SHARED(float, sv, SWISK_KAN_TILE * SWISK_KAN_TILE * SWISK_KAN_LOCAL);
  SWISK_SHARED(sk_i32, ss, SWISK_KAN_TILE * SWISK_KAN_TILE);
  kan_forward_body<T>(SWISK_METAL_IDX, p, x, grid, bw, sw, sc, y, sv, ss);
}

template <typename T>
kernel void kan_backward_x_k(device const T* x [[buffer(0)]], device const T* grid [[buffer(1)]],
                             device const T* bw [[buffer(2)]], device const T* sw [[buffer(3)]],
                             device const T* sc [[buffer(4)]], device const T* gy [[buffer(5)]],
                             device T* gx [[buffer(6)]], constant KanParams& p [[buffer(7)]], SWISK_METAL_COORDS) {
  SWISK_SHARED(float, gt, SWISK_KAN_TILE * SWISK_KAN_TILE);
  kan_backward_x_body<T>(SWISK_METAL_IDX, p, x, grid, bw, sw, sc, gy, gx, gt);
}

template <typename T>
kernel void kan_backward_w_k(device const T* x [[buffer(0)]], device const T* grid [[buffer(1)]],
                             device const T* gy [[buffer(2)]], device T* gbw [[buffer(3)]],
                             device float* ws [[buffer(4)]], constant KanParams& p [[buffer(5)]],
                             SWISK_METAL_COORDS) {
  SWISK_SHARED(float, at, SWISK_KAN_TILE * SWISK_KAN_TILE);
  SWISK_SHARED(float, gt, SWISK_KAN_TILE * SWISK_KAN_TILE);
  kan_backward_w_body<T>(SWISK_METAL_IDX, p, x, grid, gy, gbw, ws, at, gt);
}

template <typename T>
kernel void kan_backward_scale_k(device const T* sw [[buffer(0)]], device const T* sc [[buffer(1)]],
                                 device const float* ws [[buffer(2)]], device T* gsw [[buffer(3)]],
                                 device T* gsc [[buffer(4)]], constant KanParams& p [[buffer(5)]],
                                 SWISK_METAL_COORDS) {
  kan_backward_scale_body<T>(SWISK_METAL_IDX, p, sw, sc, ws, gsw, gsc);
}

#define SWISK_INSTANTIATE(T, S)                                                                            \
  template SWISK_HOST_NAME("swisk_kan_forward_" #S) kernel void kan_forward_k<T>(                        \
      device const T*, device const T*, device const T*, device const T*, device const T*, device T*,      \
      constant KanParams&, SWISK_METAL_COORD_TYPES);                                                       \
  template SWISK_HOST_NAME("swisk_kan_backward_x_" #S) kernel void kan_backward_x_k<T>(                  \
      device const T*, device const T*, device const T*, device const T*, device const T*, device const T*, \
      device T*, constant KanParams&, SWISK_METAL_COORD_TYPES);                                            \
  template SWISK_HOST_NAME("swisk_kan_backward_w_" #S) kernel void kan_backward_w_k<T>(                  \
      device const T*, device const T*, device const T*, device T*, device float*, constant KanParams&,    \
      SWISK_METAL_COORD_TYPES);                                                                            \
  template SWISK_HOST_NAME("swisk_kan_backward_scale_" #S) kernel void kan_backward_scale_k<T>(          \
      device const T*, device const T*, device const float*, device T*, device T*, constant KanParams&,    \
      SWISK_METAL_COORD_TYPES);
SWISK_INSTANTIATE(float, f32)
SWISK_INSTANTIATE(half, f16)
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310  // bfloat needs MSL 3.1
SWISK_INSTANTIATE(bfloat, bf16)
#endif
#undef SWISK_INSTANTIATE
