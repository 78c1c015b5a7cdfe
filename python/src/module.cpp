// swisk._C: the torch-free bridge. Tensors arrive as view tuples; outputs are allocated by Python.
#include "bridge.h"

#include <nanobind/stl/pair.h>

#include "emu/emulator.h"
#include "metal/plan.h"
#include "swisk/kernels/bspline.h"
#include "swisk/ops/kan.h"

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

}  // namespace swisk::bind

NB_MODULE(_C, m) {
  using namespace swisk;
  namespace nb = nanobind;
  // Prepared calls stay cached by the torch.library registrations until the interpreter ends.
  nb::set_leak_warnings(false);
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
    d["openmp"] = openmp_runtime();  // the runtime the CPU loops use, "" when serial
    d["cpu_isa"] = cpu_isa();  // the CPU kernels' clone here: avx512, avx2 or baseline
    d["cpu_vendor"] = cpu_vendor();  // intel, amd or "": the kan_linear route rule reads it
    d["cpu_vector_bytes"] = cpu_vector_bytes();  // the CPU KAN kernels' vectors here: 64 or 32
    d["max_spline_order"] = SWISK_MAX_CPU_SPLINE_ORDER;  // CPU; GPUs: max_gpu_spline_order
    d["max_gpu_spline_order"] = SWISK_MAX_GPU_SPLINE_ORDER;
    d["max_fused_spline_order"] = SWISK_MAX_SPLINE_ORDER;
    return d;
  });
  m.def("cuda_device_count", [] { return cuda_device_count(); });
  m.def("cpu_threads", [] { return cpu_threads(); });
  m.def("has_kernel", [](const std::string& op, const std::string& backend) {
    return registry().has(op, backend_from_name(backend));
  });
  m.def("ops", [] { return registry().ops(); });
  // A prepared op call: output shapes and scratch for Python to allocate, then launch(pointers, stream).
  nb::class_<PreparedCall>(m, "PreparedCall")
      .def_prop_ro("outputs", [](const PreparedCall& c) {
        nb::list l;
        for (const auto& s : c.outputs) {
          nb::list t;
          for (int64_t v : s) t.append(v);
          l.append(nb::tuple(t));
        }
        return l;
      })
      .def_prop_ro("zero_outputs", [](const PreparedCall& c) {
        nb::list l;
        for (uint8_t z : c.zero_outputs) l.append(bool(z));
        return l;
      })
      .def_ro("work", &PreparedCall::work)
      .def_prop_ro("work_dtype", [](const PreparedCall& c) { return int(c.work_dtype); })
      .def_ro("has_work", &PreparedCall::has_work)
      .def_ro("plan_only", &PreparedCall::plan_only)
      .def_prop_ro("n_tensors", &PreparedCall::n_tensors)
      // Runs with the GIL released; Metal backends return their dispatches as
      // (kernel, grid, threadgroup, parameter bytes, buffer positions) for Python to perform.
      .def("check", [](PreparedCall& c, const std::vector<uintptr_t>& data) { c.check(data); })
      .def("launch", [](PreparedCall& c, const std::vector<uintptr_t>& data, uintptr_t stream) -> nb::object {
        std::vector<MetalDispatch> ds;
        {
          nb::gil_scoped_release release;
          c.launch(data, reinterpret_cast<void*>(stream), &ds);
        }
        if (ds.empty()) return nb::none();
        nb::list out;
        for (const auto& d : ds)
          out.append(nb::make_tuple(d.kernel, nb::make_tuple(d.grid[0], d.grid[1], d.grid[2]),
                                    nb::make_tuple(d.threadgroup[0], d.threadgroup[1], d.threadgroup[2]),
                                    nb::bytes(reinterpret_cast<const char*>(d.params.data()), d.params.size()),
                                    d.buffers));
        return out;
      });
  // metal-emu's last step: runs one dispatch on the emulator with the buffers Python bound, each
  // (data pointer, bytes) placed between guard sentinels for the run.
  m.def("metal_emu_run", [](const std::string& kernel, std::vector<uint32_t> grid, std::vector<uint32_t> tg,
                            nb::bytes params, std::vector<std::pair<uintptr_t, size_t>> buffers) {
    MetalDispatch d;
    d.kernel = kernel;
    for (int k = 0; k < 3; ++k) {
      d.grid[k] = k < int(grid.size()) ? grid[k] : 1;
      d.threadgroup[k] = k < int(tg.size()) ? tg[k] : 1;
    }
    d.params.assign(params.c_str(), params.c_str() + params.size());
    std::vector<void*> ptrs;
    std::vector<emu::GuardedBuffer> guards;
    for (auto [p, bytes] : buffers) ptrs.push_back(reinterpret_cast<void*>(p));
    for (size_t i = 0; i < ptrs.size(); ++i) guards.push_back({&ptrs[i], buffers[i].second});
    nb::gil_scoped_release release;
    emu::with_guarded_buffers(std::move(guards), [&] { metal::run_emulated(d, ptrs); });
  });

  bind::bind_spline(m);
  bind::bind_wavelet(m);
  bind::bind_conv(m);
  bind::bind_sketch(m);
}
