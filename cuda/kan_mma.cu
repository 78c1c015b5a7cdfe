// Tensor-core fast path of the KAN forward for fp16/bf16, and fp32 as tf32 when the caller allows it
// (bodies: swisk/kernels/kan_mma.h).
// On the emulator (cuda-emu) the same launches run with the scalar MMA twin.
#include <type_traits>

#include "launch.h"
#include "dtype_dispatch.h"
#include "swisk/kernels/kan_mma.h"
#include "swisk/ops/kan.h"

namespace swisk::SWISK_CUDA_NS {

template <typename T>
__global__ void kan_mma_pack_kernel(KanParams p, const T* bw, const T* sw, const T* sc, T* wp) {
  kan_mma_pack_body<T>(cuda_idx(), p, bw, sw, sc, wp);
}

template <typename T>
__global__ void __launch_bounds__(SWISK_KAN_MMA_THREADS) kan_mma_forward_kernel(KanParams p, const T* x,
                                                                                 const T* grid, const T* wp, T* y) {
  SWISK_SHARED_ALIGNED(T, as, SWISK_KAN_MMA_BM * SWISK_KAN_MMA_BK);
  SWISK_SHARED_ALIGNED(T, bs, SWISK_KAN_MMA_BN * SWISK_KAN_MMA_BK);
  SWISK_SHARED_ALIGNED(float, cs, SWISK_KAN_MMA_BM * SWISK_KAN_MMA_BN);
  kan_mma_forward_body<T>(cuda_idx(), p, x, grid, wp, y, as, bs, cs);
}

template <typename T>
__global__ void __launch_bounds__(SWISK_KAN_MMA_THREADS)
    kan_mma_backward_w_kernel(KanParams p, const T* x, const T* grid, const T* gy, T* gbw, float* ws) {
  SWISK_SHARED_ALIGNED(T, as, SWISK_KAN_MMA_BM * SWISK_KAN_MMA_BK);
  SWISK_SHARED_ALIGNED(T, bs, SWISK_KAN_MMA_BN * SWISK_KAN_MMA_BK);
  SWISK_SHARED_ALIGNED(float, cs, SWISK_KAN_MMA_BM * SWISK_KAN_MMA_BN);
  kan_mma_backward_w_body<T>(cuda_idx(), p, x, grid, gy, gbw, ws, as, bs, cs);
}

// The weight gradient on the matrix units for fp16/bf16 (into grad_base_weight and the fp32 scratch
// ws, as the portable kernel); returns false otherwise.
bool kan_mma_backward_w(const KanLinearBackwardArgs& a, const KanParams& p) {
  if (a.x.dtype != DType::f16 && a.x.dtype != DType::bf16) return false;
  bool ran = false;
  dispatch_float<false>(a.x.dtype, "kan_linear_backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, sk_half> || std::is_same_v<T, sk_bfloat>) {
      SWISK_LAUNCH(kan_mma_backward_w_kernel<T>, to_dim3(kan_mma_backward_w_grid(p)), dim3(SWISK_KAN_MMA_THREADS), a.launch.stream, p,
                   a.x.ptr<const T>(), a.grid.ptr<const T>(), a.grad_out.ptr<const T>(), a.grad_base_weight.ptr<T>(),
                   a.work.ptr<float>());
      ran = true;
    }
  });
  return ran;
}

// Both run under the caller's device guard (cuda/kan.cu).

// Runs the forward on the matrix units when the dtype has them and the workspace holds the packed
// weights; returns false otherwise (the portable kernel runs instead).
bool kan_mma_forward(const KanLinearArgs& a, const KanParams& p) {
  if (!kan_mma_applies(a.x.dtype, a.tf32)) return false;
  const int64_t need = int64_t(kan_mma_packed(p.in, p.out, p.n_basis)) * int64_t(dtype_size(a.x.dtype));
  if (a.work.data == nullptr || a.work.numel() * int64_t(dtype_size(a.work.dtype)) < need) return false;
  bool ran = false;
  dispatch_float<false>(a.x.dtype, "kan_linear", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, sk_half> || std::is_same_v<T, sk_bfloat> || std::is_same_v<T, float>) {
      T* wp = static_cast<T*>(a.work.data);
      SWISK_LAUNCH(kan_mma_pack_kernel<T>, to_dim3(kan_mma_pack_grid(p)), dim3(SWISK_STRIDE_THREADS), a.launch.stream, p,
                   a.base_weight.ptr<const T>(), a.spline_weight.ptr<const T>(), a.spline_scaler.ptr<const T>(), wp);
      SWISK_LAUNCH(kan_mma_forward_kernel<T>, to_dim3(kan_mma_forward_grid(p)), dim3(SWISK_KAN_MMA_THREADS), a.launch.stream, p,
                   a.x.ptr<const T>(), a.grid.ptr<const T>(), wp, a.out.ptr<T>());
      ran = true;
    }
  });
  return ran;
}

}  // namespace swisk::SWISK_CUDA_NS
