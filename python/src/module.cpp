// swisk._C: the torch-free bridge. Tensors arrive as view tuples; outputs are allocated by Python.
#include "bridge.h"

#include "metal/plan.h"
#include "swisk/kernels/bspline.h"

namespace swisk::bind {

TensorView view(nb::handle h) {
  nb::tuple t = nb::borrow<nb::tuple>(h);
  if (t.size() != 6) throw Error(ErrorKind::type, "[swisk] tensor: malformed view");
  TensorView v;
  v.data = reinterpret_cast<void*>(nb::cast<uintptr_t>(t[0]));
  v.dtype = DType(nb::cast<int>(t[1]));
  auto shape = nb::cast<std::vector<int64_t>>(t[2]);
  auto strides = nb::cast<std::vector<int64_t>>(t[3]);
  if (shape.size() > size_t(kMaxDims) || shape.size() != strides.size())
    throw Error(ErrorKind::value, "[swisk] tensor: at most 8 dimensions are supported");
  v.ndim = int(shape.size());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
  }
  v.device = Device(nb::cast<int>(t[4]));
  v.device_index = nb::cast<int>(t[5]);
  return v;
}

TensorView view_or_none(nb::handle h) { return h.is_none() ? TensorView{} : view(h); }

nb::object plan_dict(const MetalPlan& p) {
  nb::dict d;
  d["kernel"] = p.kernel;
  d["grid"] = nb::make_tuple(p.grid[0], p.grid[1], p.grid[2]);
  d["threadgroup"] = nb::make_tuple(p.threadgroup[0], p.threadgroup[1], p.threadgroup[2]);
  d["params"] = nb::bytes(reinterpret_cast<const char*>(p.params.data()), p.params.size());
  d["buffers"] = p.buffers;
  return d;
}

Launch make_launch(const std::string& backend, uintptr_t stream, MetalPlan* plan) {
  Launch l;
  l.backend = backend_from_name(backend);
  l.stream = reinterpret_cast<void*>(stream);
  l.plan = plan;
  return l;
}

}  // namespace swisk::bind

NB_MODULE(_C, m) {
  using namespace swisk;
  namespace nb = nanobind;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = e.kind() == ErrorKind::value  ? PyExc_ValueError
                       : e.kind() == ErrorKind::type ? PyExc_TypeError
                                                     : PyExc_RuntimeError;
      PyErr_SetString(type, e.what());
    }
  });

  m.def("build_info", [] {
    nb::dict d;
    d["version"] = SWISK_VERSION;
    d["commit"] = SWISK_GIT_COMMIT;
    d["cuda_compiled"] = cuda_compiled();
    d["cuda_archs"] = cuda_archs();
    d["cuda_driver_version"] = cuda_driver_version();
    d["cuda_runtime_version"] = cuda_runtime_version();
    d["cuda_unusable_reason"] = cuda_unusable_reason();
    d["metal_compiled"] = bool(SWISK_WITH_METALLIB);
    d["metal_source"] = true;
    d["openmp"] = bool(SWISK_WITH_OPENMP);
    d["max_spline_order"] = SWISK_MAX_SPLINE_ORDER;
    return d;
  });
  m.def("cuda_device_count", [] { return cuda_device_count(); });
  m.def("has_kernel", [](const std::string& op, const std::string& backend) {
    return registry().has(op, backend_from_name(backend));
  });
  m.def("ops", [] { return registry().ops(); });
  // Runs a Metal plan on the emulator with the buffers Python would bind (tests the MPS glue).
  m.def("metal_emu_run", [](const std::string& kernel, std::vector<uint32_t> grid, std::vector<uint32_t> tg,
                            nb::bytes params, nb::list buffers) {
    MetalPlan plan;
    plan.kernel = kernel;
    for (int d = 0; d < 3; ++d) {
      plan.grid[d] = d < int(grid.size()) ? grid[d] : 1;
      plan.threadgroup[d] = d < int(tg.size()) ? tg[d] : 1;
    }
    plan.params.assign(params.c_str(), params.c_str() + params.size());
    for (nb::handle b : buffers) plan.pointers.push_back(bind::view(b).data);
    nb::gil_scoped_release release;
    metal::run_emulated(plan);
  });

  bind::bind_spline(m);
  bind::bind_wavelet(m);
}
