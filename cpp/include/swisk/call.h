// Prepare once, then launch: an op call validated up front (metadata only), with its output shapes,
// scratch size and kernel; the launch sets data pointers and runs. Python allocates every tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "swisk/registry.h"

namespace swisk {

// An op's tensor list, in order: inputs, outputs, then the scratch tensor when the op has one.
// Each Args struct lists its TensorView members in that order (kTensors) and their counts.
class PreparedCall {
 public:
  virtual ~PreparedCall() = default;
  std::vector<std::vector<int64_t>> outputs;  // output shapes (x's dtype and device)
  std::vector<uint8_t> zero_outputs;          // 1: the kernels leave it unwritten, the caller zero-fills
  int64_t work = 0;                           // scratch elements (fp32; fp64 for fp64 inputs)
  DType work_dtype = DType::f32;
  int n_inputs = 0;
  bool has_work = false;
  Backend backend = Backend::cpu;
  bool plan_only = false;  // validated, no kernel: the op runs on a route composed in Python
  bool check_data = true;  // false: launch past the data checks (tests of the kernels' own behaviour)
  int n_tensors() const { return n_inputs + int(outputs.size()) + (has_work ? 1 : 0); }
  // data: one pointer per tensor of the list (0 when absent or empty). Checks host-readable input
  // data, then runs the kernel on `stream` (CUDA); Metal appends its dispatches to `metal`.
  virtual void launch(const std::vector<uintptr_t>& data, void* stream, std::vector<MetalDispatch>* metal) = 0;
  // The data checks alone (a validation-only call's inputs, before its route runs).
  virtual void check(const std::vector<uintptr_t>& data) = 0;
};

// Runs body with each view's data moved into a copy between guard sentinels (emulated backends):
// an out-of-bounds write raises, naming the buffer.
void run_guarded(const std::vector<TensorView*>& views, const std::function<void()>& body);

// A contiguous view (no data yet) of the given shape and dtype on like's device.
TensorView dense_view(const std::vector<int64_t>& shape, DType dtype, const TensorView& like);

template <class Args>
class CallOf final : public PreparedCall {
 public:
  using Kernel = void (*)(const Args&);
  using DataCheck = void (*)(const Args&);
  CallOf(const Args& a, Kernel k, DataCheck check) : args_(a), kernel_(k), check_(check) {}
  void launch(const std::vector<uintptr_t>& data, void* stream, std::vector<MetalDispatch>* metal) override {
    constexpr int n = int(std::size(Args::kTensors));
    if (int(data.size()) != n)
      fail(ErrorKind::runtime, "swisk", "launch", "expected ", n, " tensors, got ", data.size());
    if (!kernel_) fail(ErrorKind::runtime, "swisk", "launch", "a validation-only call has no kernel");
    std::call_once(sealed_, [this] { seal(); });
    Args a = args_;  // a prepared call may be launched from several threads at once
    for (int i = 0; i < n; ++i) (a.*Args::kTensors[i]).data = reinterpret_cast<void*>(data[i]);
    a.launch = Launch{backend, stream, metal};
    if (check_ && check_data) check_(a);
    if (backend == Backend::cuda_emu) {  // the emulator: every buffer between guard sentinels
      std::vector<TensorView*> views;
      for (int i = 0; i < n; ++i) views.push_back(&(a.*Args::kTensors[i]));
      run_guarded(views, [&] { kernel_(a); });
    } else {
      kernel_(a);
    }
  }
  void check(const std::vector<uintptr_t>& data) override {
    constexpr int n = int(std::size(Args::kTensors));  // the inputs' pointers; the rest may be left out
    if (int(data.size()) > n) fail(ErrorKind::runtime, "swisk", "check", "expected ", n, " tensors, got ", data.size());
    Args a = args_;
    for (int i = 0; i < n; ++i) (a.*Args::kTensors[i]).data = reinterpret_cast<void*>(i < int(data.size()) ? data[i] : 0);
    a.launch = Launch{backend, nullptr, nullptr};
    if (check_ && check_data) check_(a);
  }
  const Args& args() const { return args_; }

 private:
  // The outputs' and scratch's views as the caller allocates them: contiguous, x's dtype and device.
  void seal() {
    for (size_t k = 0; k < outputs.size(); ++k)
      args_.*Args::kTensors[n_inputs + k] = dense_view(outputs[k], args_.x.dtype, args_.x);
    if constexpr (Args::kWork) args_.*Args::kTensors[std::size(Args::kTensors) - 1] =
        dense_view({work}, work_dtype, args_.x);
  }
  std::once_flag sealed_;
  Args args_;
  Kernel kernel_;
  DataCheck check_;
};

// A prepared call of op for validated args on backend b: kernel looked up, counts from Args.
template <class Args>
std::unique_ptr<CallOf<Args>> make_call(const char* op, const Args& a, Backend b,
                                        typename CallOf<Args>::DataCheck check = nullptr, const char* name = nullptr) {
  auto c = std::make_unique<CallOf<Args>>(a, registry().kernel(op, b, a, name), check);
  c->backend = b;
  c->n_inputs = Args::kInputs;
  c->has_work = Args::kWork;
  c->work_dtype = a.x.dtype == DType::f64 ? DType::f64 : DType::f32;
  return c;
}

// A validated call without a kernel: its shapes serve a route composed in Python (the GEMM route).
// Its kernels run on the backend: no float64 on a GPU, raised here in the name of the public op.
template <class Args>
std::unique_ptr<CallOf<Args>> make_plan_call(const char* op, const Args& a, Backend b,
                                             typename CallOf<Args>::DataCheck check) {
  if (b != Backend::cpu && a.x.dtype == DType::f64)
    fail(ErrorKind::type, op, "x", "float64 is not supported on the GPU (use float32, float16 or bfloat16) on backend ",
         backend_name(b));
  auto c = std::make_unique<CallOf<Args>>(a, nullptr, check);
  c->backend = b;
  c->n_inputs = Args::kInputs;
  c->has_work = false;
  c->plan_only = true;
  return c;
}

// The position of member t of a in Args's tensor list (Metal buffer bindings); raises if none.
template <class Args>
int tensor_index(const Args& a, const TensorView* t) {
  for (int i = 0; i < int(std::size(Args::kTensors)); ++i)
    if (&(a.*Args::kTensors[i]) == t) return i;
  fail(ErrorKind::runtime, "swisk", "metal", "a bound buffer is not in the op's tensor list");
}

// C++ callers (tests, embedders) that allocate their own outputs: check them against the prepared
// shapes, zero-fill where asked, launch; metal-emu runs its dispatches on the emulator.
void run_prepared(PreparedCall& c, const char* op, const std::vector<const TensorView*>& tensors);

}  // namespace swisk
