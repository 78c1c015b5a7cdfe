// Bindings of the B-spline family: one prepare function per op (views of the inputs, scalars, backend).
#include "bridge.h"
#include "swisk/ops/bspline.h"
#include "swisk/ops/kan.h"

namespace swisk::bind {

void bind_spline(nb::module_& m) {
  using namespace nb::literals;
  m.def("bspline_basis_prepare", [](nb::handle x, nb::handle grid, int order, const std::string& backend) {
    return bspline_basis_prepare(BsplineBasisArgs{view(x), view(grid), {}, order, {}}, backend_from_name(backend));
  });
  m.def("bspline_basis_backward_prepare",
        [](nb::handle x, nb::handle grid, nb::handle grad_out, int order, const std::string& backend) {
          BsplineBasisBackwardArgs a{view(x), view(grid), view(grad_out), {}, order, {}};
          return bspline_basis_backward_prepare(a, backend_from_name(backend));
        });
  m.def("kan_linear_prepare",
        [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, int order, bool tf32,
           const std::string& backend) {
          KanLinearArgs a{view(x), view(grid), view_or_none(bw), view(sw), view_or_none(sc), {}, {}, order, {}, tf32};
          return kan_linear_prepare(a, backend_from_name(backend));
        },
        "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "order"_a, "tf32"_a, "backend"_a);
  m.def("kan_linear_backward_prepare",
        [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, nb::handle gy, int order,
           const std::string& backend) {
          KanLinearBackwardArgs a{view(x), view(grid), view_or_none(bw), view(sw), view_or_none(sc), view(gy)};
          a.order = order;
          return kan_linear_backward_prepare(a, backend_from_name(backend));
        },
        "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "gy"_a, "order"_a, "backend"_a);
  m.def("kan_linear_workspace", [](int64_t in, int64_t out, int64_t n_basis, int order, int dtype,
                                   const std::string& backend, bool backward, bool tf32) {
    return kan_linear_workspace(in, out, n_basis, order, DType(dtype), backend_from_name(backend), backward, tf32);
  });
}

}  // namespace swisk::bind
