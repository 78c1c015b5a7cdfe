// CUDA entry points and launches of the sketch kernels (bodies: swisk/kernels/sketch.h, sketch_sparse.h,
// hadamard.h): the generation kernel's grid-stride loop over a tile's work items (sketch_items), the
// sparse-sign passes, the FWHT's passes and the SRHT's in/out kernels around them.
#include <vector>

#include "launch.h"
#include "dtype_dispatch.h"
#include "swisk/ops/sketch.h"

namespace swisk::SWISK_CUDA_NS {

// One operator (Stack false: its parameters straight from the launch's, 30-32 registers) or a stack of
// terms from one launch (a layer's small operators; at most 40 registers: 75% occupancy or more).
template <int K, bool Stack, typename T>
__global__ void __launch_bounds__(SWISK_SKETCH_THREADS, Stack ? 12 : 16) sketch_matrix_kernel(SketchParams p, T* out) {
  SWISK_SHARED(sk_u32, taken, SWISK_SKETCH_SHARED(K));
  if (Stack)
    sketch_matrix_body<K, T>(cuda_idx(), p, out, taken);
  else
    sketch_matrix_tile<K, T>(cuda_idx(), p, sketch_key(p), out, taken);
}

// 2^(L-5) threads of at most 64 registers (4, 2, 1 blocks per SM at L = 13, 14, 15: 50% occupancy);
// padded shared memory.
template <int L, typename T>
__global__ void __launch_bounds__(1 << (L - 5), 1 << (15 - L)) fwht_shared_kernel(FwhtParams p, const T* x, T* out) {
  SWISK_SHARED_DYNAMIC(float, buf, SWISK_FWHT_BUFFER(L, true));
  fwht_shared_body<L, true, T>(cuda_idx(), p, x, out, buf);
}

template <typename T>
__global__ void fwht_stage_kernel(FwhtParams p, T* out) {
  fwht_stage_body<T>(cuda_idx(), p, out);
}

// The chunk pass, then one launch per register pass of longer rows, in order on the stream (x may be out).
template <typename T>
static void launch_fwht(const std::vector<FwhtParams>& passes, const T* x, T* out, void* stream) {
  const sk_u32 l = fwht_chunk_log2(passes[0]);
  static_assert(SWISK_FWHT_CUDA_CHUNK_LOG2 >= 13 && SWISK_FWHT_CUDA_CHUNK_LOG2 <= 15, "chunks of 2^13 to 2^15");
  auto* fwht_shared = l == 15   ? &fwht_shared_kernel<15, T>
                      : l == 14 ? &fwht_shared_kernel<14, T>
                                : &fwht_shared_kernel<13, T>;
  auto* fwht_stage = &fwht_stage_kernel<T>;
  SWISK_LAUNCH_SHARED(fwht_shared, to_dim3(fwht_shared_grid(passes[0])), dim3(fwht_chunk_threads(passes[0])),
                      sizeof(float) * SWISK_FWHT_BUFFER(l, true), stream, passes[0], x, out);
  for (size_t s = 1; s < passes.size(); ++s)
    SWISK_LAUNCH(fwht_stage, to_dim3(fwht_stage_grid(passes[s])), dim3(SWISK_FWHT_THREADS), stream, passes[s], out);
}

static void fwht(const FwhtArgs& a) {
  const int64_t n = a.x.size(-1);
  const std::vector<FwhtParams> passes = fwht_passes(a.x.numel() / n, n, a.scale, SWISK_FWHT_CUDA_CHUNK_LOG2);
  if (fwht_units(passes[0]) == 0) return;
  const DeviceGuard guard("fwht", a.x);
  dispatch_float<false>(a.x.dtype, "fwht", [&](auto tag) {
    using T = decltype(tag);
    launch_fwht<T>(passes, a.x.ptr<const T>(), a.out.ptr<T>(), a.launch.stream);
  });
}

#define SWISK_SRHT_KERNEL(name, A, B)                      \
  template <typename T>                                    \
  __global__ void name##_kernel(SrhtParams p, A a, B b) {  \
    name##_body<T>(cuda_idx(), p, a, b);                   \
  }
SWISK_SRHT_KERNEL(srht_in, const T*, float*)
SWISK_SRHT_KERNEL(srht_out, const float*, T*)
SWISK_SRHT_KERNEL(srht_t_in, const T*, float*)
SWISK_SRHT_KERNEL(srht_t_out, const float*, T*)
#undef SWISK_SRHT_KERNEL

__global__ void srht_tables_kernel(SrhtParams p, float* work) { srht_tables_body(cuda_idx(), p, work); }

// The tables, then per pass of at most p.cap rows, forward: pad(D x) into work, the FWHT on work, the kept
// rows out; the transpose the other way round.
static void srht(const SrhtArgs& a) {
  const SrhtParams p = srht_params(a);
  if (p.rows == 0) return;
  const DeviceGuard guard(a.transpose ? "srht_transpose" : "srht", a.x);
  dispatch_float<false>(a.x.dtype, "srht", [&](auto tag) {
    using T = decltype(tag);
    float* work = a.work.ptr<float>();
    auto* in = a.transpose ? &srht_t_in_kernel<T> : &srht_in_kernel<T>;
    auto* out = a.transpose ? &srht_t_out_kernel<T> : &srht_out_kernel<T>;
    SWISK_LAUNCH(srht_tables_kernel, to_dim3(srht_grid(srht_table_items(p))), dim3(SWISK_FWHT_THREADS),
                 a.launch.stream, p, work);
    for (sk_u64 r0 = 0; r0 < p.rows; r0 += p.cap) {  // 64-bit: rows near 2^32 must not wrap
      const SrhtParams q = srht_pass(p, r0);
      SWISK_LAUNCH(in, to_dim3(srht_in_grid(q)), dim3(SWISK_FWHT_THREADS), a.launch.stream, q, a.x.ptr<const T>(),
                   work);
      launch_fwht<float>(fwht_passes(q.rows, q.big_n, 1.0, SWISK_FWHT_CUDA_CHUNK_LOG2), work, work, a.launch.stream);
      SWISK_LAUNCH(out, to_dim3(srht_out_grid(q)), dim3(SWISK_FWHT_THREADS), a.launch.stream, q, work,
                   a.out.ptr<T>());
    }
  });
}

// Sparse-sign (sketch_sparse.h): x S^T from S sorted by rows, g S from the column table.
__global__ void sparse_table_kernel(SparseParams p, sk_u32* work) {
  SWISK_SHARED(sk_u32, taken, SWISK_SKETCH_THREADS * SWISK_SKETCH_MAX_NNZ);
  sparse_table_body(cuda_idx(), p, work, taken);
}
__global__ void sparse_sort_kernel(SparseParams p, sk_u32* work) {
  SWISK_SHARED(sk_u32, row_key, SWISK_SPARSE_SORT);
  SWISK_SHARED(sk_u32, col_key, SWISK_SPARSE_SORT);
  sparse_sort_body(cuda_idx(), p, work, row_key, col_key);
}
template <typename T>
__global__ void sparse_apply_kernel(SparseParams p, const T* x, sk_u32* work, T* out) {
  SWISK_SHARED(float, xs, SWISK_SPARSE_ROWS * SWISK_SPARSE_COLS);
  sparse_apply_body<T>(cuda_idx(), p, x, work, out, xs);
}
template <typename T>
__global__ void sparse_sum_kernel(SparseParams p, const sk_u32* work, T* out) {
  sparse_sum_body<T>(cuda_idx(), p, work, out);
}
template <typename T>
__global__ void sparse_apply_t_kernel(SparseParams p, const T* g, const sk_u32* work, T* out) {
  sparse_apply_t_body<T>(cuda_idx(), p, g, work, out);
}

static void sparse_sketch(const SketchArgs& a) {
  const SparseParams p = sparse_sketch_params(a);
  if (p.rows == 0) return;
  const char* op = a.transpose ? "sketch_transpose" : "sketch";
  const DeviceGuard guard(op, a.x);
  sk_u32* work = a.work.ptr<sk_u32>();
  const dim3 threads(SWISK_SPARSE_THREADS);
  if (a.transpose) {
    SWISK_LAUNCH(sparse_table_kernel, to_dim3(sparse_grid(p.s.n, SWISK_SKETCH_THREADS)), dim3(SWISK_SKETCH_THREADS),
                 a.launch.stream, p, work);
  } else {
    SWISK_LAUNCH(sparse_sort_kernel, to_dim3(sparse_sort_grid(p)), threads, a.launch.stream, p, work);
  }
  const SkGrid outs = sparse_apply_grid(p, a.transpose);
  dispatch_float<false>(a.x.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a.x.ptr<const T>();
    T* out = a.out.ptr<T>();
    if (a.transpose) {
      SWISK_LAUNCH(sparse_apply_t_kernel<T>, to_dim3(outs), threads, a.launch.stream, p, x, work, out);
      return;
    }
    SWISK_LAUNCH(sparse_apply_kernel<T>, to_dim3(outs), threads, a.launch.stream, p, x, work, out);
    if (p.splits > 1)
      SWISK_LAUNCH(sparse_sum_kernel<T>, to_dim3(sparse_sum_grid(p)), threads, a.launch.stream, p, work, out);
  });
}

static void generate(const SketchMatrixArgs& a) {
  const SketchParams p = sketch_params(a);  // every term, in one launch (the grid's y)
  if (sketch_items(p) == 0) return;
  const DeviceGuard guard("sketch_matrix", a.x);
  dispatch_float<false>(a.x.dtype, "sketch_matrix", [&](auto tag) {
    using T = decltype(tag);
    dispatch_sketch(p.kind, [&](auto k) {
      constexpr int K = decltype(k)::value;
      auto* sketch_matrix = p.terms > 0 ? &sketch_matrix_kernel<K, true, T> : &sketch_matrix_kernel<K, false, T>;
      SWISK_LAUNCH(sketch_matrix, to_dim3(sketch_grid(p)), dim3(SWISK_SKETCH_THREADS), a.launch.stream, p,
                   a.out.ptr<T>());
    });
  });
}

void register_sketch(Registry& r, Backend b) {
  r.add<SketchMatrixArgs>("sketch_matrix", b, &generate, &gpu_float_only<SketchMatrixArgs>);
  r.add<FwhtArgs>("fwht", b, &fwht, &gpu_float_only<FwhtArgs>);
  r.add<SrhtArgs>("srht", b, &srht, &gpu_float_only<SrhtArgs>);
  r.add<SrhtArgs>("srht_transpose", b, &srht, &gpu_float_only<SrhtArgs>);
  r.add<SketchArgs>("sketch", b, &sparse_sketch, &gpu_float_only<SketchArgs>);
  r.add<SketchArgs>("sketch_transpose", b, &sparse_sketch, &gpu_float_only<SketchArgs>);
}

}  // namespace swisk::SWISK_CUDA_NS
