// CUDA entry points and launches of the wavelet KAN kernels (bodies: swisk/kernels/wavelet.h).
// Forward: (batch x out) tiles. Backward, one launch: (out x in) tiles for the parameter gradients and
// (batch x in) tiles for dx; each output has one owner and a fixed reduction order, no atomics.
#include "launch.h"
#include "dtype_dispatch.h"
#include "swisk/ops/wavelet.h"

// Forward: two blocks of 256 threads per SM (at most 128 registers a thread). Backward: one, since its
// parameter tile (five 4x4 register tiles) spills under 128 registers (scripts/sass_check.py fails on it).
#if defined(SWISK_CUDA_EMU)
#define SWISK_WAV_BOUNDS
#define SWISK_WAV_BWD_BOUNDS
#else
#define SWISK_WAV_BOUNDS __launch_bounds__(SWISK_WAV_THREADS, 2)
#define SWISK_WAV_BWD_BOUNDS __launch_bounds__(SWISK_WAV_THREADS, 1)
#endif

namespace swisk::SWISK_CUDA_NS {

template <int K, typename T>
__global__ void SWISK_WAV_BOUNDS wavelet_kan_fwd_kernel(WaveletParams p, const T* x, const T* s, const T* t, const T* w, T* y) {
  SWISK_SHARED(float, s0, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s1, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s2, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s3, SWISK_WAV_SHARED);
  wavelet_kan_fwd_body<K, T>(cuda_idx(), p, x, s, t, w, y, s0, s1, s2, s3);
}

template <int K, typename T>
__global__ void SWISK_WAV_BWD_BOUNDS wavelet_kan_bwd_kernel(WaveletParams p, const T* x, const T* s, const T* t, const T* w, const T* g,
                                       T* dx, T* ds, T* dt, T* dw) {
  SWISK_SHARED(float, s0, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s1, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s2, SWISK_WAV_SHARED);
  SWISK_SHARED(float, s3, SWISK_WAV_SHARED);
  wavelet_kan_bwd_body<K, T>(cuda_idx(), p, x, s, t, w, g, dx, ds, dt, dw, s0, s1, s2, s3);
}

static void forward(const WaveletKanArgs& a) {
  const WaveletParams p = wavelet_params(a.x, a.weight, a.wavelet);
  if (wav_fwd_tiles(p) == 0) return;
  const DeviceGuard guard("wavelet_kan", a.x);
  dispatch_float<false>(a.x.dtype, "wavelet_kan", [&](auto tag) {
    using T = decltype(tag);
    dispatch_wavelet(p.wavelet, [&](auto k) {
      auto* wavelet_kan_fwd = &wavelet_kan_fwd_kernel<decltype(k)::value, T>;  // a comma-free macro argument
      SWISK_LAUNCH(wavelet_kan_fwd, to_dim3(wav_fwd_grid(p)), dim3(SWISK_WAV_THREADS), a.launch.stream, p,
                   a.x.ptr<const T>(), a.scale.ptr<const T>(), a.translation.ptr<const T>(),
                   a.weight.ptr<const T>(), a.out.ptr<T>());
    });
  });
}

static void backward(const WaveletKanBackwardArgs& a) {
  const WaveletParams p = wavelet_params(a.x, a.weight, a.wavelet);
  if (wav_bwd_tiles(p) == 0) return;
  const DeviceGuard guard("wavelet_kan_backward", a.x);
  dispatch_float<false>(a.x.dtype, "wavelet_kan_backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_wavelet(p.wavelet, [&](auto k) {
      auto* wavelet_kan_bwd = &wavelet_kan_bwd_kernel<decltype(k)::value, T>;
      SWISK_LAUNCH(wavelet_kan_bwd, to_dim3(wav_bwd_grid(p)), dim3(SWISK_WAV_THREADS), a.launch.stream, p,
                   a.x.ptr<const T>(), a.scale.ptr<const T>(), a.translation.ptr<const T>(),
                   a.weight.ptr<const T>(), a.grad_out.ptr<const T>(), a.grad_x.ptr<T>(), a.grad_scale.ptr<T>(),
                   a.grad_translation.ptr<T>(), a.grad_weight.ptr<T>());
    });
  });
}

void register_wavelet(Registry& r, Backend b) {
  r.add<WaveletKanArgs>("wavelet_kan", b, &forward, &gpu_float_only<WaveletKanArgs>);
  r.add<WaveletKanBackwardArgs>("wavelet_kan_backward", b, &backward, &gpu_float_only<WaveletKanBackwardArgs>);
}

}  // namespace swisk::SWISK_CUDA_NS
