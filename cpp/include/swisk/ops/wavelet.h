// Wavelet KAN: the public C++ entry points (validate, then dispatch on the registry).
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "swisk/kernels/wavelet.h"
#include "swisk/registry.h"

namespace swisk {

// x (..., in); scale, translation, weight (out, in); out (..., out).
struct WaveletKanArgs {
  TensorView x, scale, translation, weight, out;
  std::string wavelet;
  Launch launch;
};

// grad_out (..., out) -> grad_x (..., in) and the three (out, in) parameter gradients.
struct WaveletKanBackwardArgs {
  TensorView x, scale, translation, weight, grad_out;
  TensorView grad_x, grad_scale, grad_translation, grad_weight;
  std::string wavelet;
  Launch launch;
};

// "mexican_hat, morlet, dog, meyer, shannon" (id order).
const char* wavelet_names();
// The id of a wavelet name; an unknown name raises ValueError listing the valid ones.
int wavelet_id(const char* op, const std::string& name);

// Checks names, shapes, dtypes and devices (no data access); returns the output shape.
std::vector<int64_t> wavelet_kan_shape(const TensorView& x, const TensorView& scale, const TensorView& translation,
                                       const TensorView& weight, const std::string& wavelet, Backend b);
void wavelet_kan(const WaveletKanArgs& args);
void wavelet_kan_backward(const WaveletKanBackwardArgs& args);

WaveletParams wavelet_params(const TensorView& x, const TensorView& weight, const std::string& wavelet);

// Calls f(std::integral_constant<int, K>{}) for the wavelet id K (kernels take it as a template).
template <class F>
void dispatch_wavelet(sk_u32 id, F&& f) {
  switch (id) {
    case SK_MEXICAN_HAT: f(std::integral_constant<int, SK_MEXICAN_HAT>{}); return;
    case SK_MORLET: f(std::integral_constant<int, SK_MORLET>{}); return;
    case SK_DOG: f(std::integral_constant<int, SK_DOG>{}); return;
    case SK_MEYER: f(std::integral_constant<int, SK_MEYER>{}); return;
    default: f(std::integral_constant<int, SK_SHANNON>{}); return;
  }
}

}  // namespace swisk
