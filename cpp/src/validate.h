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

}  // namespace swisk
