// Tensor-core fast path of the KAN forward for fp16/bf16 on sm_80+ (WMMA), separate from the portable
// kernels: y = A · Wᵀ over the flattened columns c = i*(n_basis+1) + q, with A[n, c] (silu(x) for q = 0,
// else B_{q-1}(x)) and W[o, c] (base_weight, or spline_weight · spline_scaler) built tile by tile in shared
// memory, fp32 accumulation. nvcc only (the emulator cannot run MMA); the suite covers it on a real GPU.
#include <mma.h>

#include "dtype_dispatch.h"
#include "launch.h"
#include "swisk/ops/kan.h"

namespace swisk::cuda_backend {

constexpr int kTcM = 64, kTcN = 64, kTcK = 32;  // block tile: rows x outputs x columns; 4 warps of 32x32
constexpr int kTcPad = 8;                        // keeps 16-bit rows 16-byte aligned and spreads banks

template <typename T>
__global__ void __launch_bounds__(128) kan_forward_tc_kernel(KanParams p, const T* x, const T* grid, const T* bw,
                                                             const T* sw, const T* sc, T* y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  __shared__ __align__(32) T as[kTcM][kTcK + kTcPad];
  __shared__ __align__(32) T ws[kTcN][kTcK + kTcPad];
  __shared__ __align__(32) float cs[kTcM][kTcN + 4];
  const int tid = threadIdx.x, warp = tid / 32, wm = warp / 2, wn = warp % 2;
  const unsigned n0 = blockIdx.x * kTcM, o0 = blockIdx.y * kTcN;
  const unsigned nq = p.n_basis + 1, cols = p.in * nq;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 2; ++n) wmma::fill_fragment(acc[m][n], 0.0f);
  for (unsigned c0 = 0; c0 < cols; c0 += kTcK) {
    for (int e = tid; e < kTcM * kTcK; e += 128) {  // A tile: bases computed here, never stored globally
      const unsigned r = e / kTcK, cc = e % kTcK, n = n0 + r, c = c0 + cc;
      float a = 0.0f;
      if (n < p.rows && c < cols) {
        const unsigned i = c / nq, q = c % nq;
        const float xv = float(x[sk_u64(n) * p.in + i]);
        if (q == 0) {
          a = p.has_base ? kan_silu(xv) : 0.0f;
        } else {
          BsplineLocal<float> b = bspline_local<float>(xv, grid + sk_u64(i) * p.n_knots,
                                                       int(p.n_knots), int(p.order), false);
          a = bspline_pick<float>(b.v, b.span, int(q) - 1);
        }
      }
      as[r][cc] = T(a);
    }
    for (int e = tid; e < kTcN * kTcK; e += 128) {  // W tile
      const unsigned r = e / kTcK, cc = e % kTcK, o = o0 + r, c = c0 + cc;
      float w = 0.0f;
      if (o < p.out && c < cols) {
        const unsigned i = c / nq, q = c % nq;
        const unsigned long long oi = sk_u64(o) * p.in + i;
        if (q == 0) w = p.has_base ? float(bw[oi]) : 0.0f;
        else w = float(sw[oi * p.n_basis + q - 1]) * (p.has_scaler ? float(sc[oi]) : 1.0f);
      }
      ws[r][cc] = T(w);
    }
    __syncthreads();
    for (int kk = 0; kk < kTcK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb[2];  // B[k][o] = ws[o][k]
      for (int m = 0; m < 2; ++m) wmma::load_matrix_sync(fa[m], &as[wm * 32 + m * 16][kk], kTcK + kTcPad);
      for (int n = 0; n < 2; ++n) wmma::load_matrix_sync(fb[n], &ws[wn * 32 + n * 16][kk], kTcK + kTcPad);
      for (int m = 0; m < 2; ++m)
        for (int n = 0; n < 2; ++n) wmma::mma_sync(acc[m][n], fa[m], fb[n], acc[m][n]);
    }
    __syncthreads();
  }
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 2; ++n)
      wmma::store_matrix_sync(&cs[wm * 32 + m * 16][wn * 32 + n * 16], acc[m][n], kTcN + 4, wmma::mem_row_major);
  __syncthreads();
  for (int e = tid; e < kTcM * kTcN; e += 128) {
    const unsigned r = e / kTcN, cc = e % kTcN, n = n0 + r, o = o0 + cc;
    if (n < p.rows && o < p.out) y[sk_u64(n) * p.out + o] = T(cs[r][cc]);
  }
#endif
}

// True (and launched) when the fast path applies: fp16/bf16 on a device of compute capability 8.0+.
bool kan_forward_tensor_cores(const KanLinearArgs& a, const KanParams& p) {
  if (a.x.dtype != DType::f16 && a.x.dtype != DType::bf16) return false;
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, a.x.device_index) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (major < 8 || (p.rows + kTcM - 1) / kTcM > 0x7fffffffu || (p.out + kTcN - 1) / kTcN > 65535u) return false;
  const dim3 grid((p.rows + kTcM - 1) / kTcM, (p.out + kTcN - 1) / kTcN), block(128);
  if (a.x.dtype == DType::f16)
    SWISK_LAUNCH(kan_forward_tc_kernel<__half>, grid, block, a.launch.stream, p, a.x.ptr<const __half>(),
                 a.grid.ptr<const __half>(), a.base_weight.ptr<const __half>(), a.spline_weight.ptr<const __half>(),
                 a.spline_scaler.ptr<const __half>(), a.out.ptr<__half>());
  else
    SWISK_LAUNCH(kan_forward_tc_kernel<__nv_bfloat16>, grid, block, a.launch.stream, p,
                 a.x.ptr<const __nv_bfloat16>(), a.grid.ptr<const __nv_bfloat16>(),
                 a.base_weight.ptr<const __nv_bfloat16>(), a.spline_weight.ptr<const __nv_bfloat16>(),
                 a.spline_scaler.ptr<const __nv_bfloat16>(), a.out.ptr<__nv_bfloat16>());
  return true;
}

}  // namespace swisk::cuda_backend
