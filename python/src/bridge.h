// Helpers shared by the per-family binding files: tensor views from Python, prepared calls.
#pragma once

#include <memory>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "swisk/call.h"

namespace swisk::bind {

namespace nb = nanobind;

// A view tuple (data_ptr, dtype code, shape, strides, device code, device index) -> TensorView.
TensorView view(nb::handle h);
// An optional tensor: None -> an empty view (data == nullptr, ndim == 0).
TensorView view_or_none(nb::handle h);

// One function per op family adds its ops' prepare functions to the module.
void bind_spline(nb::module_& m);
void bind_wavelet(nb::module_& m);
void bind_conv(nb::module_& m);
void bind_sketch(nb::module_& m);

}  // namespace swisk::bind
