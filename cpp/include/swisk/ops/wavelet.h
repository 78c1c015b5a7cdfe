// Wavelet KAN: the public C++ entry points (prepare once, then launch).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "swisk/kernels/wavelet.h"
#include "swisk/call.h"

namespace swisk {

// x (..., in); scale, translation, weight (out, in); out (..., out).
struct WaveletKanArgs {
  TensorView x, scale, translation, weight, out;
  std::string wavelet;
  Launch launch;
  static constexpr int kInputs = 4;
  static constexpr bool kWork = false;
  using A = WaveletKanArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::scale, &A::translation, &A::weight, &A::out};
};

// grad_out (..., out) -> grad_x (..., in) and the three (out, in) parameter gradients.
struct WaveletKanBackwardArgs {
  TensorView x, scale, translation, weight, grad_out;
  TensorView grad_x, grad_scale, grad_translation, grad_weight;
  std::string wavelet;
  Launch launch;
  static constexpr int kInputs = 5;
  static constexpr bool kWork = false;
  using A = WaveletKanBackwardArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x,      &A::scale,      &A::translation,      &A::weight,
                                                 &A::grad_out, &A::grad_x, &A::grad_scale, &A::grad_translation,
                                                 &A::grad_weight};
};

// "mexican_hat, morlet, dog, meyer, shannon" (id order, from SWISK_WAVELETS).
const char* wavelet_names();
// The name of a valid wavelet id.
const char* wavelet_name(int id);
// The id of a wavelet name; an unknown name raises ValueError listing the valid ones.
int wavelet_id(const char* op, const std::string& name);

// Validate the inputs (metadata only) and decide the outputs and kernel; a zero scale is checked at
// launch on host-readable backends.
std::unique_ptr<PreparedCall> wavelet_kan_prepare(const WaveletKanArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> wavelet_kan_backward_prepare(const WaveletKanBackwardArgs& inputs, Backend b);

// For C++ callers holding their own outputs: prepare on args.launch.backend, check them, run.
void wavelet_kan(const WaveletKanArgs& args);
void wavelet_kan_backward(const WaveletKanBackwardArgs& args);

WaveletParams wavelet_params(const TensorView& x, const TensorView& weight, const std::string& wavelet);

// Calls f(std::integral_constant<int, K>{}) for the wavelet id K (kernels take it as a template).
template <class F>
void dispatch_wavelet(sk_u32 id, F&& f) {
#define SK_WAV_CASE(k, name)                \
  case k:                                   \
    f(std::integral_constant<int, k>{});    \
    return;
  switch (id) { SWISK_WAVELETS(SK_WAV_CASE) }
#undef SK_WAV_CASE
  fail(ErrorKind::value, "wavelet_kan", "wavelet", "unknown wavelet id ", id);
}

}  // namespace swisk
