// Fused KAN linear layer: the public C++ entry points (prepare once, then launch).
#pragma once

#include <memory>
#include <vector>

#include "swisk/call.h"
#include "swisk/kernels/kan.h"

namespace swisk {

// x (..., in), grid (in, n_knots), base_weight (out, in) or empty (no base branch),
// spline_weight (out, in, n_basis), spline_scaler (out, in) or empty, out (..., out).
// work: the scratch tensor the prepared call asks for (fp32, fp64 for fp64 inputs).
// tf32: fp32 inputs may run on the CUDA matrix units as tf32 (torch.backends.cuda.matmul.allow_tf32).
struct KanLinearArgs {
  TensorView x, grid, base_weight, spline_weight, spline_scaler, out, work;
  int order = 3;
  Launch launch;
  bool tf32 = false;
  bool gemm = false;  // validate for the GEMM route (composed in Python): no kernel, any spline order
  static constexpr int kInputs = 5;
  static constexpr bool kWork = true;
  static constexpr TensorView KanLinearArgs::* kTensors[] = {
      &KanLinearArgs::x, &KanLinearArgs::grid, &KanLinearArgs::base_weight, &KanLinearArgs::spline_weight,
      &KanLinearArgs::spline_scaler, &KanLinearArgs::out, &KanLinearArgs::work};
};

// The CUDA tensor-core forward applies to fp16/bf16, and to fp32 when tf32 is allowed.
inline bool kan_mma_applies(DType d, bool tf32) { return d == DType::f16 || d == DType::bf16 || (tf32 && d == DType::f32); }

// Gradients of every argument but grid; grad_base_weight / grad_spline_scaler are empty when their
// argument is. need_x / need_weights false: grad_x / the weights' gradients are empty and not computed
// (a network's first layer needs no grad_x; frozen weights need no gradients).
struct KanLinearBackwardArgs {
  TensorView x, grid, base_weight, spline_weight, spline_scaler, grad_out;
  TensorView grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler, work;
  int order = 3;
  Launch launch;
  bool gemm = false;
  bool need_x = true, need_weights = true;
  static constexpr int kInputs = 6;
  static constexpr bool kWork = true;
  using A = KanLinearBackwardArgs;
  static constexpr TensorView A::* kTensors[] = {
      &A::x,      &A::grid,   &A::base_weight,      &A::spline_weight,      &A::spline_scaler,     &A::grad_out,
      &A::grad_x, &A::grad_base_weight, &A::grad_spline_weight, &A::grad_spline_scaler, &A::work};
};

// The GEMM route's last step on the CPU (where it saves two passes and a temporary over the weights):
// from the gradient of the scaled spline weights x (out, in, n_basis), grad_spline_weight = x·scaler
// (may be x itself: each element is read before it is written) and grad_spline_scaler = Σ_j x·sw.
struct KanUnpackArgs {
  TensorView x, spline_weight, spline_scaler, grad_spline_weight, grad_spline_scaler;
  Launch launch;
  static constexpr int kInputs = 3;
  static constexpr bool kWork = false;
  using A = KanUnpackArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::spline_weight, &A::spline_scaler,
                                                 &A::grad_spline_weight, &A::grad_spline_scaler};
};
std::unique_ptr<PreparedCall> kan_unpack_prepare(const KanUnpackArgs& inputs, Backend b);

// Validate the inputs (metadata only: shapes, dtypes, devices, layout, spline_order) and decide the
// outputs, the scratch and the kernel. Knot values are checked at launch on host-readable backends.
std::unique_ptr<PreparedCall> kan_linear_prepare(const KanLinearArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> kan_linear_backward_prepare(const KanLinearBackwardArgs& inputs, Backend b);

// For C++ callers holding their own outputs: prepare on args.launch.backend, check them, run.
void kan_linear(const KanLinearArgs& args);
void kan_linear_backward(const KanLinearBackwardArgs& args);

// Scratch elements the backend needs (forward or backward) for these sizes: its own part (the base),
// then in CUDA's tensor-core forward the words of the non-finite weight scan (kan_nonfinite_words; the
// CPU takes them only when a weight is inf or NaN).
int64_t kan_linear_workspace(int64_t in, int64_t out, int64_t n_basis, int order, DType dtype, Backend b,
                             bool backward, bool tf32 = false);
int64_t kan_linear_scratch_base(int64_t in, int64_t out, int64_t n_basis, int order, DType dtype, Backend b,
                                bool backward, bool tf32 = false);
// The CPU kernels' scratch, in elements of the accumulation type: knot-difference reciprocals (in,
// order, n_knots), then the repacked weights wt (inc, outp / lanes, nq, lanes) of a chunk of inc
// features and outc outputs and, in backward, their gradient gwt: nq rows per feature, silu's, ns =
// max(n_basis, order + 1) spline rows (zero rows after n_basis) and in backward the scaler's row (the
// spline rows then unscaled: the scaler's gradient sums gwt · wt); outp = outc, a multiple of 64
// bytes (whole vectors of lanes). The forward runs the outputs chunk by chunk (every feature), the backward
// the features (every output), so wt and gwt stay within kan_cpu_chunk_bytes unless one vector of
// outputs or 16 features exceed it. Offsets: multiples of 64 bytes.
// The chunk bound: a quarter of the layer's weights (base, spline, scaler), within 4 to 16 MiB, so the
// kernels' working memory stays a fraction of the weights' (bench: fwd+bwd working memory). The
// backward's lower end is 512 KiB: its chunks of features share no work (the forward's chunks of
// outputs each evaluate every basis), and at batch ~ out the weights' size is what the formulation
// holds (b64 784->64 fwd+bwd, 1 thread: peak 9.9 -> 4.7 MiB, same time within noise).
constexpr int64_t kKanCpuChunkMin = int64_t(4) << 20, kKanCpuChunkMax = int64_t(16) << 20;
constexpr int64_t kKanCpuBackChunkMin = int64_t(512) << 10;
inline int64_t kan_cpu_chunk_bytes(int64_t in, int64_t out, int64_t n_basis, int64_t elem, bool backward = false) {
  const int64_t quarter = in * out * (n_basis + 2) * elem / 4, lo = backward ? kKanCpuBackChunkMin : kKanCpuChunkMin;
  return quarter < lo ? lo : quarter > kKanCpuChunkMax ? kKanCpuChunkMax : quarter;
}
struct KanCpuLayout {
  int64_t ns, nq, outc, inc, outp, wt, gwt, total;
};
KanCpuLayout kan_cpu_layout(int64_t in, int64_t out, int64_t n_basis, int order, DType dtype, bool backward);
// A forward of at most kKanCpuDirectRows rows, a backward of at most kKanCpuDirectBackRows, in
// fp32/fp64 reads the parameters as stored (and writes their gradients so), without the repacking
// (cpu/kan_direct.h); its scratch is the knot-difference reciprocals alone. The backward's limit, from
// backward times against the repacked path (1 thread, medians of 9): 1000->1000 direct / repacked at 5,
// 8, 12, 16, 24 rows 0.6-0.7, 0.7, 0.7, ~1, 1.5; 256->256 (in cache) ~1 at 5-8 rows, 1.4-1.7 at 12.
constexpr int64_t kKanCpuDirectRows = 4, kKanCpuDirectBackRows = 8;
inline bool kan_cpu_direct(int64_t rows, DType d, bool backward = false) {
  return rows >= 1 && rows <= (backward ? kKanCpuDirectBackRows : kKanCpuDirectRows) &&
         (d == DType::f32 || d == DType::f64);
}
// Where a GPU forward's non-finite scan words start in a.work.
sk_i32* kan_nonfinite_scratch(const KanLinearArgs& a, const KanParams& p);

// Kernel parameters of a validated call.
KanParams kan_params(const TensorView& x, const TensorView& grid, const TensorView& base_weight,
                     const TensorView& spline_weight, const TensorView& spline_scaler, int order);

}  // namespace swisk
