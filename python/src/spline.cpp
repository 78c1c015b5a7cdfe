// Bindings of the B-spline family.
#include "bridge.h"
#include "swisk/ops/bspline.h"
#include "swisk/ops/kan.h"

namespace swisk::bind {

void bind_spline(nb::module_& m) {
  using namespace nb::literals;
  m.def("bspline_basis_shape", [](nb::handle x, nb::handle grid, int order, const std::string& backend) {
    return bspline_basis_shape(view(x), view(grid), order, backend_from_name(backend));
  });
  m.def("bspline_basis", [](nb::handle x, nb::handle grid, nb::handle out, int order, const std::string& backend,
                            uintptr_t stream) {
    BsplineBasisArgs a{view(x), view(grid), view(out), order, {}};
    return run(a, backend, stream, [](const BsplineBasisArgs& a) { bspline_basis(a); });
  });
  m.def("bspline_basis_backward", [](nb::handle x, nb::handle grid, nb::handle grad_out, nb::handle grad_x, int order,
                                     const std::string& backend, uintptr_t stream) {
    BsplineBasisBackwardArgs a{view(x), view(grid), view(grad_out), view(grad_x), order, {}};
    return run(a, backend, stream, [](const BsplineBasisBackwardArgs& a) { bspline_basis_backward(a); });
  });

  m.def("kan_linear_shape", [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, int order,
                               const std::string& backend) {
    return kan_linear_shape(view(x), view(grid), view_or_none(bw), view(sw), view_or_none(sc), order,
                            backend_from_name(backend));
  }, "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "order"_a, "backend"_a);
  m.def("kan_linear_workspace", [](int64_t in, int64_t out, int64_t n_basis, int order, int dtype,
                                   const std::string& backend, bool backward, bool tf32) {
    return kan_linear_workspace(in, out, n_basis, order, DType(dtype), backend_from_name(backend), backward, tf32);
  });
  m.def("kan_linear", [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, nb::handle out,
                         nb::handle work, int order, bool tf32, const std::string& backend, uintptr_t stream) {
    KanLinearArgs a{view(x), view(grid), view_or_none(bw), view(sw), view_or_none(sc), view(out),
                    view_or_none(work), order, {}, tf32};
    return run(a, backend, stream, [](const KanLinearArgs& a) { kan_linear(a); });
  }, "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "out"_a, "work"_a.none(), "order"_a, "tf32"_a,
        "backend"_a, "stream"_a);
  m.def("kan_linear_backward",
        [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, nb::handle gy, nb::handle gx,
           nb::handle gbw, nb::handle gsw, nb::handle gsc, nb::handle work, int order, int stage,
           const std::string& backend, uintptr_t stream) {
          KanLinearBackwardArgs a{view(x),  view(grid), view_or_none(bw),  view(sw),         view_or_none(sc),
                                  view(gy), view(gx),   view_or_none(gbw), view(gsw),        view_or_none(gsc),
                                  view_or_none(work),   order,             stage,            {}};
          return run(a, backend, stream, [](const KanLinearBackwardArgs& a) { kan_linear_backward(a); });
        },
        "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "gy"_a, "gx"_a, "gbw"_a.none(), "gsw"_a,
        "gsc"_a.none(), "work"_a.none(), "order"_a, "stage"_a, "backend"_a, "stream"_a);
}

}  // namespace swisk::bind
