// Emulator thunks of the Metal wavelet KAN kernels: buffers and parameter bytes -> the entry point.
#pragma once

template <int K, typename T>
void wavelet_kan_fwd_thunk(void* const* b, const void* p) {
  wavelet_kan_fwd_k<K, T>((const T*)b[0], (const T*)b[1], (const T*)b[2], (const T*)b[3], (T*)b[4],
                          *(const WaveletParams*)p, SWISK_COORDS);
}

template <int K, typename T>
void wavelet_kan_bwd_thunk(void* const* b, const void* p) {
  wavelet_kan_bwd_k<K, T>((const T*)b[0], (const T*)b[1], (const T*)b[2], (const T*)b[3], (const T*)b[4], (T*)b[5],
                          (T*)b[6], (T*)b[7], (T*)b[8], *(const WaveletParams*)p, SWISK_COORDS);
}

#define SWISK_WAV_EMU(pass, K, W)                                                                    \
  {"swisk_wavelet_kan_" #pass "_" #W "_f32", wavelet_kan_##pass##_thunk<K, float>},                 \
      {"swisk_wavelet_kan_" #pass "_" #W "_f16", wavelet_kan_##pass##_thunk<K, half>},              \
      {"swisk_wavelet_kan_" #pass "_" #W "_bf16", wavelet_kan_##pass##_thunk<K, bfloat>}
#define SWISK_WAV_EMU_BOTH(K, W) SWISK_WAV_EMU(fwd, K, W), SWISK_WAV_EMU(bwd, K, W),
#define SWISK_METAL_WAVELET_KERNELS SWISK_WAVELETS(SWISK_WAV_EMU_BOTH)
