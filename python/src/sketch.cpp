// Bindings of the sketch family: one prepare function per op.
#include "bridge.h"
#include "swisk/ops/sketch.h"

namespace swisk::bind {

void bind_sketch(nb::module_& m) {
  m.def("sketch_matrix_prepare", [](nb::handle like, const std::string& kind, int64_t k, int64_t n, int64_t seed,
                                    int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t nnz, int64_t terms,
                                    int64_t stream0, int64_t stream_step, const std::string& backend) {
    SketchMatrixArgs a;
    a.x = view(like);
    a.kind = kind;
    a.k = k, a.n = n, a.seed = seed, a.r0 = r0, a.r1 = r1, a.c0 = c0, a.c1 = c1, a.nnz = nnz;
    a.terms = terms, a.stream0 = stream0, a.stream_step = stream_step;
    return sketch_matrix_prepare(a, backend_from_name(backend));
  });
  m.def("sketch_prepare", [](nb::handle x, const std::string& kind, int64_t k, int64_t seed, int64_t nnz,
                             const std::string& backend) {
    SketchArgs a;
    a.x = view(x);
    a.kind = kind;
    a.k = k, a.seed = seed, a.nnz = nnz;
    return sketch_prepare(a, backend_from_name(backend));
  });
  m.def("sketch_transpose_prepare", [](nb::handle g, const std::string& kind, int64_t n, int64_t seed, int64_t nnz,
                                       const std::string& backend) {
    SketchArgs a;
    a.x = view(g);
    a.kind = kind;
    a.n = n, a.seed = seed, a.nnz = nnz, a.transpose = true;
    return sketch_prepare(a, backend_from_name(backend));
  });
  m.def("fwht_prepare", [](nb::handle x, double scale, const std::string& backend) {
    FwhtArgs a;
    a.x = view(x);
    a.scale = scale;
    return fwht_prepare(a, backend_from_name(backend));
  });
  m.def("srht_prepare", [](nb::handle x, int64_t k, int64_t seed, const std::string& backend) {
    SrhtArgs a;
    a.x = view(x);
    a.k = k, a.seed = seed;
    return srht_prepare(a, backend_from_name(backend));
  });
  m.def("srht_transpose_prepare", [](nb::handle g, int64_t n, int64_t seed, const std::string& backend) {
    SrhtArgs a;
    a.x = view(g);
    a.n = n, a.seed = seed, a.transpose = true;
    return srht_prepare(a, backend_from_name(backend));
  });
  m.def("sketch_names", [] { return std::string(sketch_names()); });
  m.def("sketch_max_nnz", [] { return int(SWISK_SKETCH_MAX_NNZ); });
}

}  // namespace swisk::bind
