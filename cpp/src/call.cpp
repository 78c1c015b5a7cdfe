// Running a prepared call from C++ with caller-owned tensors (tests, embedders).
#include "swisk/call.h"

#include <cstring>

#include "emu/emulator.h"
#include "metal/plan.h"
#include "validate.h"

namespace swisk {

// Bytes from a view's first element to one past its last (non-negative strides).
static size_t extent_bytes(const TensorView& v) {
  if (v.data == nullptr || v.numel() == 0) return 0;
  int64_t last = 0;
  for (int d = 0; d < v.ndim; ++d) last += (v.shape[d] - 1) * v.strides[d];
  return size_t(last + 1) * dtype_size(v.dtype);
}

void run_guarded(const std::vector<TensorView*>& views, const std::function<void()>& body) {
  std::vector<emu::GuardedBuffer> bufs;
  for (TensorView* v : views) bufs.push_back({&v->data, extent_bytes(*v)});
  emu::with_guarded_buffers(std::move(bufs), body);
}

TensorView dense_view(const std::vector<int64_t>& shape, DType dtype, const TensorView& like) {
  TensorView v;
  v.dtype = dtype;
  v.device = like.device;
  v.device_index = like.device_index;
  v.ndim = int(shape.size());
  SWISK_CHECK(v.ndim <= kMaxDims, value, "swisk", "output", "at most ", kMaxDims, " dimensions are supported");
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = shape[d];
    v.strides[d] = stride;
    stride *= shape[d];
  }
  return v;
}

void run_prepared(PreparedCall& c, const char* op, const std::vector<const TensorView*>& tensors) {
  SWISK_CHECK(int(tensors.size()) == c.n_tensors(), runtime, op, "tensors", "expected ", c.n_tensors(), ", got ",
              tensors.size());
  static const char* names[] = {"out", "out1", "out2", "out3", "out4", "out5"};
  const TensorView& x = *tensors[0];
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    const TensorView& t = *tensors[c.n_inputs + k];
    const char* name = k < 6 ? names[k] : "output";
    check_same_dtype(op, name, t, x, "x");
    check_same_device(op, name, t, x, "x");
    check_shape(op, name, t, c.outputs[k]);
    if (t.numel() > 0) check_contiguous(op, name, t);
    if (c.zero_outputs[k] && t.numel() > 0) {
      SWISK_CHECK(host_readable(c.backend), runtime, op, name, "zero-filling needs host memory");
      std::memset(t.data, 0, size_t(t.numel()) * dtype_size(t.dtype));
    }
  }
  if (c.has_work && c.work > 0) {
    const TensorView& w = *tensors.back();
    SWISK_CHECK(w.dtype == c.work_dtype, type, op, "work", "must be ", dtype_name(c.work_dtype), ", got ",
                dtype_name(w.dtype));
    check_contiguous(op, "work", w);
    SWISK_CHECK(w.numel() >= c.work, value, op, "work", "needs ", c.work, " elements, got ", w.numel());
  }
  std::vector<uintptr_t> data;
  for (const TensorView* t : tensors) data.push_back(reinterpret_cast<uintptr_t>(t->data));
  std::vector<MetalDispatch> dispatches;
  c.launch(data, nullptr, &dispatches);
  SWISK_CHECK(dispatches.empty() || c.backend == Backend::metal_emu, value, op, "device",
              "Metal dispatches run from Python on torch's MPS stream");
  for (const MetalDispatch& d : dispatches) {
    std::vector<void*> buffers;
    for (int i : d.buffers) buffers.push_back(tensors[i]->data);
    metal::run_emulated(d, buffers);
  }
}

}  // namespace swisk
