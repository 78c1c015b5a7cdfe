// Bindings of the B-spline family: one prepare function per op (views of the inputs, scalars, backend).
#include "bridge.h"
#include "swisk/ops/bspline.h"
#include "swisk/ops/kan.h"

namespace swisk::bind {

void bind_spline(nb::module_& m) {
  using namespace nb::literals;
  m.def("bspline_basis_prepare",
        [](nb::handle x, nb::handle grid, int order, int derivative, const std::string& backend) {
          BsplineBasisArgs a{view(x), view(grid), {}, order, {}, derivative, false};
          return bspline_basis_prepare(a, backend_from_name(backend));
        });
  m.def("kan_expand_prepare",
        [](nb::handle x, nb::handle grid, int order, int derivative, bool base, const std::string& backend) {
          BsplineBasisArgs a{view(x), view(grid), {}, order, {}, derivative, base};
          return kan_expand_prepare(a, backend_from_name(backend));
        });
  m.def("kan_contract_prepare", [](nb::handle x, nb::handle grid, nb::handle grad, int order, int derivative,
                                   bool base, const std::string& backend) {
    BsplineContractArgs a{view(x), view(grid), view(grad), {}, order, {}, derivative, base};
    return bspline_contract_prepare(a, backend_from_name(backend));
  });
  m.def("kan_linear_prepare",
        [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, int order, bool tf32, bool gemm,
           const std::string& backend) {
          KanLinearArgs a{view(x), view(grid), view_or_none(bw), view(sw), view_or_none(sc), {}, {}, order, {}, tf32,
                          gemm};
          return kan_linear_prepare(a, backend_from_name(backend));
        },
        "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "order"_a, "tf32"_a, "gemm"_a, "backend"_a);
  m.def("kan_linear_backward_prepare",
        [](nb::handle x, nb::handle grid, nb::handle bw, nb::handle sw, nb::handle sc, nb::handle gy, int order,
           bool need_x, bool need_weights, bool gemm, const std::string& backend) {
          KanLinearBackwardArgs a{view(x), view(grid), view_or_none(bw), view(sw), view_or_none(sc), view(gy)};
          a.order = order;
          a.gemm = gemm;
          a.need_x = need_x, a.need_weights = need_weights;
          return kan_linear_backward_prepare(a, backend_from_name(backend));
        },
        "x"_a, "grid"_a, "bw"_a.none(), "sw"_a, "sc"_a.none(), "gy"_a, "order"_a, "need_x"_a, "need_weights"_a,
        "gemm"_a, "backend"_a);
  m.def("kan_unpack_prepare", [](nb::handle x, nb::handle sw, nb::handle sc, const std::string& backend) {
    return kan_unpack_prepare(KanUnpackArgs{view(x), view(sw), view(sc)}, backend_from_name(backend));
  });
  m.def("kan_linear_workspace", [](int64_t in, int64_t out, int64_t n_basis, int order, int dtype,
                                   const std::string& backend, bool backward, bool tf32) {
    return kan_linear_workspace(in, out, n_basis, order, DType(dtype), backend_from_name(backend), backward, tf32);
  });
}

}  // namespace swisk::bind
