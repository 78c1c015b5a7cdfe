// Bindings of the KAN convolution ops' prepare functions.
#include "bridge.h"
#include "swisk/ops/conv.h"

namespace swisk::bind {

using namespace nb::literals;

void bind_conv(nb::module_& m) {
  using Ints = std::vector<int64_t>;
  m.def("kan_conv_prepare",
        [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, int order, Ints stride,
           Ints padding, Ints dilation, int64_t groups, const std::string& activation, const std::string& backend) {
          KanConvArgs a{view(x), view(grid), view_or_none(bw), view(sw), view_or_none(sc)};
          a.geo = {order, std::move(stride), std::move(padding), std::move(dilation), groups, activation};
          return kan_conv_prepare(a, backend_from_name(backend));
        },
        "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "order"_a, "stride"_a, "padding"_a, "dilation"_a,
        "groups"_a, "activation"_a, "backend"_a);
  m.def("kan_conv_backward_prepare",
        [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, nb::handle gy, int order,
           Ints stride, Ints padding, Ints dilation, int64_t groups, const std::string& activation, bool need_x,
           bool need_weights, const std::string& backend) {
          KanConvBackwardArgs a{view(x), view(grid), view_or_none(bw), view(sw), view_or_none(sc), view(gy)};
          a.geo = {order, std::move(stride), std::move(padding), std::move(dilation), groups, activation};
          a.need_x = need_x, a.need_weights = need_weights;
          return kan_conv_backward_prepare(a, backend_from_name(backend));
        },
        "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "gy"_a, "order"_a, "stride"_a, "padding"_a,
        "dilation"_a, "groups"_a, "activation"_a, "need_x"_a, "need_weights"_a, "backend"_a);
  m.def("kan_conv_activations", [] { return std::string(kan_conv_activations()); });
}

}  // namespace swisk::bind
