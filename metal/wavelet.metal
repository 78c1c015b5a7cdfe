// Metal entry points of the wavelet KAN kernels (bodies: swisk/kernels/wavelet.h), one per wavelet.
#include "swisk/kernels/metal_entry.h"
#include "swisk/kernels/wavelet.h"

template <int K, typename T>
kernel void wavelet_kan_fwd_k(device const T* x [[buffer(0)]], device const T* s [[buffer(1)]],
                              device const T* t [[buffer(2)]], device const T* w [[buffer(3)]],
                              device T* y [[buffer(4)]], constant WaveletParams& p [[buffer(5)]], SWISK_METAL_COORDS) {
  SWISK_SHARED(float, s0, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s1, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s2, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s3, SWISK_WAV_SHARED);
  wavelet_kan_fwd_body<K, T>(SWISK_METAL_IDX, p, x, s, t, w, y, s0, s1, s2, s3);
}

template <int K, typename T>
kernel void wavelet_kan_bwd_k(device const T* x [[buffer(0)]], device const T* s [[buffer(1)]],
                              device const T* t [[buffer(2)]], device const T* w [[buffer(3)]],
                              device const T* g [[buffer(4)]], device T* dx [[buffer(5)]], device T* ds [[buffer(6)]],
                              device T* dt [[buffer(7)]], device T* dw [[buffer(8)]],
                              constant WaveletParams& p [[buffer(9)]], SWISK_METAL_COORDS) {
  SWISK_SHARED(float, s0, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s1, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s2, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s3, SWISK_WAV_SHARED);
  wavelet_kan_bwd_body<K, T>(SWISK_METAL_IDX, p, x, s, t, w, g, dx, ds, dt, dw, s0, s1, s2, s3);
}

#define SWISK_WAV_INSTANTIATE(K, W, T, S)                                                                     \
  template SWISK_HOST_NAME("swisk_wavelet_kan_fwd_" #W "_" #S) kernel void wavelet_kan_fwd_k<K, T>(          \
      device const T*, device const T*, device const T*, device const T*, device T*, constant WaveletParams&, \
      SWISK_METAL_COORD_TYPES);                                                                             \
  template SWISK_HOST_NAME("swisk_wavelet_kan_bwd_" #W "_" #S) kernel void wavelet_kan_bwd_k<K, T>(          \
      device const T*, device const T*, device const T*, device const T*, device const T*, device T*,       \
      device T*, device T*, device T*, constant WaveletParams&, SWISK_METAL_COORD_TYPES);
// One instantiation per (wavelet of SWISK_WAVELETS, dtype).
#define SWISK_WAV_F32(K, W) SWISK_WAV_INSTANTIATE(K, W, float, f32)
#define SWISK_WAV_F16(K, W) SWISK_WAV_INSTANTIATE(K, W, half, f16)
#define SWISK_WAV_BF16(K, W) SWISK_WAV_INSTANTIATE(K, W, bfloat, bf16)
SWISK_WAVELETS(SWISK_WAV_F32)
SWISK_WAVELETS(SWISK_WAV_F16)
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310  // bfloat needs MSL 3.1
SWISK_WAVELETS(SWISK_WAV_BF16)
#endif
#undef SWISK_WAV_F32
#undef SWISK_WAV_F16
#undef SWISK_WAV_BF16
#undef SWISK_WAV_INSTANTIATE
