// Metal launch plans of the wavelet KAN kernels (metal/wavelet.metal): one threadgroup of 256 threads
// per 64 x 64 tile; the backward is one dispatch (parameter tiles, then dx tiles).
#include <string>

#include "plan.h"
#include "swisk/ops/wavelet.h"

namespace swisk::metal {

static std::string family(const char* pass, const WaveletParams& p) {
  return std::string("wavelet_kan_") + pass + "_" + wavelet_name(int(p.wavelet));
}

static void forward(const WaveletKanArgs& a) {
  const WaveletParams p = wavelet_params(a.x, a.weight, a.wavelet);
  if (wav_fwd_tiles(p) == 0) return;
  submit(a.launch, make_plan(a, family("fwd", p).c_str(), p, wav_fwd_grid(p), SWISK_WAV_THREADS, 1,
                             {&a.x, &a.scale, &a.translation, &a.weight, &a.out}));
}

static void backward(const WaveletKanBackwardArgs& a) {
  const WaveletParams p = wavelet_params(a.x, a.weight, a.wavelet);
  if (wav_bwd_tiles(p) == 0) return;
  submit(a.launch, make_plan(a, family("bwd", p).c_str(), p, wav_bwd_grid(p), SWISK_WAV_THREADS, 1,
                             {&a.x, &a.scale, &a.translation, &a.weight, &a.grad_out, &a.grad_x, &a.grad_scale,
                              &a.grad_translation, &a.grad_weight}));
}

void register_wavelet(Registry& r, Backend b) {
  r.add<WaveletKanArgs>("wavelet_kan", b, &forward, &gpu_float_only<WaveletKanArgs>);
  r.add<WaveletKanBackwardArgs>("wavelet_kan_backward", b, &backward, &gpu_float_only<WaveletKanBackwardArgs>);
}

}  // namespace swisk::metal
