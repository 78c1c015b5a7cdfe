// Helpers shared by the per-family binding files: tensor views from Python, running a frontend.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "swisk/registry.h"

namespace swisk::bind {

namespace nb = nanobind;

// A view tuple (data_ptr, dtype code, shape, strides, device code, device index) -> TensorView.
TensorView view(nb::handle h);
// An optional tensor: None -> an empty view (data == nullptr, ndim == 0).
TensorView view_or_none(nb::handle h);
nb::object plan_dict(const MetalPlan& p);
Launch make_launch(const std::string& backend, uintptr_t stream, MetalPlan* plan);

// Runs an op frontend with the GIL released; returns the Metal plan for the mps backend, else None.
template <class Args, class F>
nb::object run(Args& a, const std::string& backend, uintptr_t stream, F&& frontend) {
  MetalPlan plan;
  a.launch = make_launch(backend, stream, &plan);
  {
    nb::gil_scoped_release release;
    frontend(a);
  }
  return a.launch.backend == Backend::metal ? plan_dict(plan) : nb::none();
}

// One function per op family adds its ops to the module.
void bind_spline(nb::module_& m);
void bind_wavelet(nb::module_& m);

}  // namespace swisk::bind
