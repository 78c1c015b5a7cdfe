// Bindings of the B-spline family.
#include "bridge.h"
#include "swisk/ops/bspline.h"

namespace swisk::bind {

void bind_spline(nb::module_& m) {
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
}

}  // namespace swisk::bind
