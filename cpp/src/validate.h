// Argument checks shared by the op frontends; each names the op and the argument.
#pragma once

#include "swisk/registry.h"

namespace swisk {

void check_float(const char* op, const char* arg, const TensorView& t);
void check_ndim(const char* op, const char* arg, const TensorView& t, int ndim, const char* layout);
void check_min_ndim(const char* op, const char* arg, const TensorView& t, int ndim, const char* layout);
void check_same_dtype(const char* op, const char* arg, const TensorView& t, const TensorView& ref, const char* ref_name);
void check_same_device(const char* op, const char* arg, const TensorView& t, const TensorView& ref, const char* ref_name);
void check_backend(const char* op, const char* arg, const TensorView& t, Backend b);
void check_contiguous(const char* op, const char* arg, const TensorView& t);
void check_shape(const char* op, const char* arg, const TensorView& t, const std::vector<int64_t>& shape);
// Host-readable knot rows must be finite and strictly increasing.
void check_knots(const char* op, const char* arg, const TensorView& grid);
bool host_readable(Backend b);

inline std::vector<int64_t> shape_of(const TensorView& t) { return std::vector<int64_t>(t.shape, t.shape + t.ndim); }
// An optional tensor argument was given (None arrives as an empty view).
inline bool present(const TensorView& t) { return t.data != nullptr || t.ndim > 0; }
// A KAN backward's outputs (grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler): each
// argument's shape, or {0} for an absent argument or a gradient not asked for.
std::vector<std::vector<int64_t>> kan_gradient_shapes(const TensorView& x, const TensorView& bw, const TensorView& sw,
                                                      const TensorView& sc, bool need_x, bool need_weights);

}  // namespace swisk
