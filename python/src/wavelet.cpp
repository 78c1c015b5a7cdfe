// Bindings of the wavelet KAN family.
#include "bridge.h"
#include "swisk/ops/wavelet.h"

namespace swisk::bind {

void bind_wavelet(nb::module_& m) {
  m.def("wavelet_kan_shape", [](nb::handle x, nb::handle scale, nb::handle translation, nb::handle weight,
                                const std::string& wavelet, const std::string& backend) {
    return wavelet_kan_shape(view(x), view(scale), view(translation), view(weight), wavelet,
                             backend_from_name(backend));
  });
  m.def("wavelet_kan", [](nb::handle x, nb::handle scale, nb::handle translation, nb::handle weight, nb::handle out,
                          const std::string& wavelet, const std::string& backend, uintptr_t stream) {
    WaveletKanArgs a{view(x), view(scale), view(translation), view(weight), view(out), wavelet, {}};
    return run(a, backend, stream, [](const WaveletKanArgs& a) { wavelet_kan(a); });
  });
  m.def("wavelet_kan_backward",
        [](nb::handle x, nb::handle scale, nb::handle translation, nb::handle weight, nb::handle grad_out,
           nb::handle grad_x, nb::handle grad_scale, nb::handle grad_translation, nb::handle grad_weight,
           const std::string& wavelet, const std::string& backend, uintptr_t stream) {
          WaveletKanBackwardArgs a{view(x),        view(scale),      view(translation),
                                   view(weight),   view(grad_out),   view(grad_x),
                                   view(grad_scale), view(grad_translation), view(grad_weight),
                                   wavelet,        {}};
          return run(a, backend, stream, [](const WaveletKanBackwardArgs& a) { wavelet_kan_backward(a); });
        });
  m.def("wavelet_names", [] { return std::string(wavelet_names()); });
}

}  // namespace swisk::bind
