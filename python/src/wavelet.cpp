// Bindings of the wavelet KAN family: one prepare function per op.
#include "bridge.h"
#include "swisk/ops/wavelet.h"

namespace swisk::bind {

void bind_wavelet(nb::module_& m) {
  m.def("wavelet_kan_prepare", [](nb::handle x, nb::handle scale, nb::handle translation, nb::handle weight,
                                  const std::string& wavelet, const std::string& backend) {
    WaveletKanArgs a{view(x), view(scale), view(translation), view(weight), {}, wavelet, {}};
    return wavelet_kan_prepare(a, backend_from_name(backend));
  });
  m.def("wavelet_kan_backward_prepare", [](nb::handle x, nb::handle scale, nb::handle translation,
                                           nb::handle weight, nb::handle grad_out, const std::string& wavelet,
                                           const std::string& backend) {
    WaveletKanBackwardArgs a{view(x), view(scale), view(translation), view(weight), view(grad_out)};
    a.wavelet = wavelet;
    return wavelet_kan_backward_prepare(a, backend_from_name(backend));
  });
  m.def("wavelet_names", [] { return std::string(wavelet_names()); });
}

}  // namespace swisk::bind
