#include "validate.h"

#include <cmath>
#include <sstream>

#include "dtype_dispatch.h"

namespace swisk {

void check_float(const char* op, const char* arg, const TensorView& t) {
  SWISK_CHECK(is_floating(t.dtype), type, op, arg, "expected a floating-point tensor, got ", dtype_name(t.dtype));
}

void check_ndim(const char* op, const char* arg, const TensorView& t, int ndim, const char* layout) {
  SWISK_CHECK(t.ndim == ndim, value, op, arg, "must be ", layout, ", got shape ", t.shape_str());
}

void check_min_ndim(const char* op, const char* arg, const TensorView& t, int ndim, const char* layout) {
  SWISK_CHECK(t.ndim >= ndim, value, op, arg, "must be ", layout, ", got shape ", t.shape_str());
}

void check_same_dtype(const char* op, const char* arg, const TensorView& t, const TensorView& ref, const char* ref_name) {
  SWISK_CHECK(t.dtype == ref.dtype, type, op, arg, "dtype ", dtype_name(t.dtype), " differs from ", ref_name, "'s ",
              dtype_name(ref.dtype));
}

void check_same_device(const char* op, const char* arg, const TensorView& t, const TensorView& ref, const char* ref_name) {
  SWISK_CHECK(t.device == ref.device && t.device_index == ref.device_index, value, op, arg, "is on ",
              device_name(t.device), ":", t.device_index, " but ", ref_name, " is on ", device_name(ref.device), ":",
              ref.device_index);
}

void check_backend(const char* op, const char* arg, const TensorView& t, Backend b) {
  SWISK_CHECK(t.device == backend_device(b), value, op, arg, "is on ", device_name(t.device), ", backend ",
              backend_name(b), " needs ", device_name(backend_device(b)), " tensors");
}

void check_contiguous(const char* op, const char* arg, const TensorView& t) {
  SWISK_CHECK(t.is_contiguous(), value, op, arg, "must be contiguous");
}

void check_shape(const char* op, const char* arg, const TensorView& t, const std::vector<int64_t>& shape) {
  bool ok = t.ndim == int(shape.size());
  for (int d = 0; ok && d < t.ndim; ++d) ok = t.shape[d] == shape[d];
  if (ok) return;
  std::ostringstream os;
  os << "(";
  for (size_t d = 0; d < shape.size(); ++d) os << (d ? ", " : "") << shape[d];
  os << ")";
  fail(ErrorKind::value, op, arg, "must have shape ", os.str(), ", got ", t.shape_str());
}

bool host_readable(Backend b) { return backend_device(b) == Device::cpu; }

void check_knots(const char* op, const char* arg, const TensorView& grid) {
  const int64_t rows = grid.shape[0], n = grid.shape[1];
  dispatch_float<true>(grid.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const T* g = grid.ptr<const T>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t t = 0; t < n; ++t) {
        const double v = double(float_of(g[r * n + t]));
        SWISK_CHECK(std::isfinite(v), value, op, arg, "row ", r, " has a non-finite knot at ", t);
        if (t > 0)
          SWISK_CHECK(v > double(float_of(g[r * n + t - 1])), value, op, arg, "knots must be strictly increasing; row ",
                      r, " is not at index ", t);
      }
  });
}

std::vector<std::vector<int64_t>> kan_gradient_shapes(const TensorView& x, const TensorView& bw, const TensorView& sw,
                                                      const TensorView& sc, bool need_x, bool need_weights) {
  const std::vector<int64_t> none{0};
  const auto given = [&](const TensorView& t, bool need) { return need && present(t) ? shape_of(t) : none; };
  return {given(x, need_x), given(bw, need_weights), given(sw, need_weights), given(sc, need_weights)};
}

}  // namespace swisk
