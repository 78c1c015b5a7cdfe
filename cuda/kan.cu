// CUDA entry points and launches of the fused KAN linear kernels (bodies: swisk/kernels/kan.h).
#include "launch.h"
#include "dtype_dispatch.h"
#include "swisk/ops/kan.h"

namespace swisk::SWISK_CUDA_NS {

constexpr unsigned kTile = SWISK_KAN_TILE;

template <typename T>
__global__ void kan_forward_kernel(KanParams p, const T* x, const T* grid, const T* bw, const T* sw, const T* sc,
                                   T* y) {
  SWISK_SHARED(float, sv, SWISK_KAN_TILE * SWISK_KAN_TILE * SWISK_KAN_LOCAL);
  SWISK_SHARED(sk_i32, ss, SWISK_KAN_TILE * SWISK_KAN_TILE);
  kan_forward_body<T>(cuda_idx(), p, x, grid, bw, sw, sc, y, sv, ss);
}

template <typename T>
__global__ void kan_backward_x_kernel(KanParams p, const T* x, const T* grid, const T* bw, const T* sw, const T* sc,
                                      const T* gy, T* gx) {
  SWISK_SHARED(float, gt, SWISK_KAN_TILE * SWISK_KAN_TILE);
  kan_backward_x_body<T>(cuda_idx(), p, x, grid, bw, sw, sc, gy, gx, gt);
}

template <typename T>
__global__ void kan_backward_w_kernel(KanParams p, const T* x, const T* grid, const T* gy, T* gbw, float* ws) {
  SWISK_SHARED(float, at, SWISK_KAN_TILE * SWISK_KAN_TILE);
  SWISK_SHARED(float, gt, SWISK_KAN_TILE * SWISK_KAN_TILE);
  kan_backward_w_body<T>(cuda_idx(), p, x, grid, gy, gbw, ws, at, gt);
}

template <typename T>
__global__ void kan_backward_scale_kernel(KanParams p, const T* sw, const T* sc, const float* ws, T* gsw, T* gsc) {
  kan_backward_scale_body<T>(cuda_idx(), p, sw, sc, ws, gsw, gsc);
}

template <typename T>
__global__ void kan_nonfinite_scan_kernel(KanParams p, const T* sw, const T* sc, sk_i32* jr, sk_i32* bad) {
  kan_nonfinite_scan_body<T>(cuda_idx(), p, sw, sc, jr, bad);
}

template <typename T>
__global__ void kan_nonfinite_fix_kernel(KanParams p, const T* x, const T* grid, const sk_i32* jr, const sk_i32* bad,
                                         T* y) {
  kan_nonfinite_fix_body<T>(cuda_idx(), p, x, grid, jr, bad, y);
}

// cuda/kan_mma.cu: the tensor-core forward (fp16/bf16, fp32 as tf32) and weight gradient (fp16/bf16);
// false when they do not apply.
bool kan_mma_forward(const KanLinearArgs& a, const KanParams& p);
bool kan_mma_backward_w(const KanLinearBackwardArgs& a, const KanParams& p);

static void forward(const KanLinearArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  const DeviceGuard guard("kan_linear", a.x);
  if (p.in == 0 || p.rows == 0 || p.out == 0) return;  // the caller zero-fills what the prepared call marks
  const bool mma = kan_mma_forward(a, p);
  dispatch_float<false>(a.x.dtype, "kan_linear", [&](auto tag) {
    using T = decltype(tag);
    const T *x = a.x.ptr<const T>(), *g = a.grid.ptr<const T>(), *sw = a.spline_weight.ptr<const T>();
    const T* sc = a.spline_scaler.ptr<const T>();
    if (!mma) {  // one launch: the kernel reads every weight and makes the formulation's 0·inf itself
      SWISK_LAUNCH(kan_forward_kernel<T>, to_dim3(kan_forward_grid(p)), dim3(kTile, kTile), a.launch.stream, p, x, g,
                   a.base_weight.ptr<const T>(), sw, sc, a.out.ptr<T>());
      return;
    }
    // the tensor cores' 0·inf outside each row's bases: a scan of the weights, then an early-out fix
    sk_i32* jr = kan_nonfinite_scratch(a, p);
    sk_i32* bad = jr + 2 * sk_u64(p.out) * p.in;
    SWISK_LAUNCH(kan_nonfinite_scan_kernel<T>, to_dim3(kan_nonfinite_scan_grid(p)), dim3(SWISK_STRIDE_THREADS),
                 a.launch.stream, p, sw, sc, jr, bad);
    SWISK_LAUNCH(kan_nonfinite_fix_kernel<T>, to_dim3(kan_nonfinite_fix_grid(p)), dim3(SWISK_STRIDE_THREADS),
                 a.launch.stream, p, x, g, jr, bad, a.out.ptr<T>());
  });
}

static void backward(const KanLinearBackwardArgs& a) {
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  if (p.in == 0) return;  // every gradient is empty
  const DeviceGuard guard("kan_linear_backward", a.x);
  if (p.out == 0) return;  // dx = 0: zero-filled by the caller (the prepared call marks it)
  dispatch_float<false>(a.x.dtype, "kan_linear_backward", [&](auto tag) {
    using T = decltype(tag);
    const T *x = a.x.ptr<const T>(), *g = a.grid.ptr<const T>(), *gy = a.grad_out.ptr<const T>();
    const T *bw = a.base_weight.ptr<const T>(), *sw = a.spline_weight.ptr<const T>();
    const T* sc = a.spline_scaler.ptr<const T>();
    float* ws = a.work.ptr<float>();
    const dim3 block(kTile, kTile);
    if (p.rows > 0 && a.need_x)
      SWISK_LAUNCH(kan_backward_x_kernel<T>, to_dim3(kan_backward_x_grid(p)), block, a.launch.stream, p, x, g, bw, sw,
                   sc, gy, a.grad_x.ptr<T>());
    if (!a.need_weights) return;
    if (!kan_mma_backward_w(a, p))
      SWISK_LAUNCH(kan_backward_w_kernel<T>, to_dim3(kan_backward_w_grid(p)), block, a.launch.stream, p, x, g, gy,
                   a.grad_base_weight.ptr<T>(), ws);
    SWISK_LAUNCH(kan_backward_scale_kernel<T>, to_dim3(kan_backward_scale_grid(p)), dim3(SWISK_STRIDE_THREADS),
                 a.launch.stream, p, sw, sc, ws, a.grad_spline_weight.ptr<T>(), a.grad_spline_scaler.ptr<T>());
  });
}

void register_kan(Registry& r, Backend b) {
  r.add<KanLinearArgs>("kan_linear", b, &forward, &gpu_float_only<KanLinearArgs>);
  r.add<KanLinearBackwardArgs>("kan_linear_backward", b, &backward, &gpu_float_only<KanLinearBackwardArgs>);
}

}  // namespace swisk::SWISK_CUDA_NS
