// Metal entry points of the sketch kernels (bodies: swisk/kernels/sketch.h, sketch_sparse.h, hadamard.h).
#include "swisk/kernels/metal_entry.h"
#include "swisk/kernels/hadamard.h"
#include "swisk/kernels/sketch_sparse.h"

template <int K, typename T>
kernel void sketch_matrix_k(device T* out [[buffer(0)]], constant SketchParams& p [[buffer(1)]], SWISK_METAL_COORDS) {
  SWISK_SHARED(sk_u32, taken, SWISK_SKETCH_SHARED(K));
  sketch_matrix_body<K, T>(SWISK_METAL_IDX, p, out, taken);
}

template <typename T>
kernel void fwht_shared_k(device const T* x [[buffer(0)]], device T* out [[buffer(1)]],
                          constant FwhtParams& p [[buffer(2)]], SWISK_METAL_COORDS) {
  SWISK_SHARED(float, buf, SWISK_FWHT_BUFFER(SWISK_FWHT_METAL_CHUNK_LOG2, false));
  fwht_shared_body<SWISK_FWHT_METAL_CHUNK_LOG2, false, T>(SWISK_METAL_IDX, p, x, out, buf);
}

template <typename T>
kernel void fwht_stage_k(device T* out [[buffer(0)]], constant FwhtParams& p [[buffer(1)]], SWISK_METAL_COORDS) {
  fwht_stage_body<T>(SWISK_METAL_IDX, p, out);
}

#define SWISK_FWHT_INSTANTIATE(T, S)                                                                             \
  template SWISK_HOST_NAME("swisk_fwht_shared_" #S) kernel void fwht_shared_k<T>(device const T*, device T*,     \
                                                                                  constant FwhtParams&,         \
                                                                                  SWISK_METAL_COORD_TYPES);     \
  template SWISK_HOST_NAME("swisk_fwht_stage_" #S) kernel void fwht_stage_k<T>(device T*, constant FwhtParams&, \
                                                                                SWISK_METAL_COORD_TYPES);
SWISK_FWHT_INSTANTIATE(float, f32)
SWISK_FWHT_INSTANTIATE(half, f16)
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310
SWISK_FWHT_INSTANTIATE(bfloat, bf16)
#endif
#undef SWISK_FWHT_INSTANTIATE

#define SWISK_SRHT_ENTRY(name, A, B)                                                                         \
  template <typename T>                                                                                     \
  kernel void name##_k(A a [[buffer(0)]], B b [[buffer(1)]], constant SrhtParams& p [[buffer(2)]], SWISK_METAL_COORDS) { \
    name##_body<T>(SWISK_METAL_IDX, p, a, b);                                                                \
  }
SWISK_SRHT_ENTRY(srht_in, device const T*, device float*)
SWISK_SRHT_ENTRY(srht_out, device const float*, device T*)
SWISK_SRHT_ENTRY(srht_t_in, device const T*, device float*)
SWISK_SRHT_ENTRY(srht_t_out, device const float*, device T*)
#undef SWISK_SRHT_ENTRY

// One per dtype like the passes (the plan names kernels by the op's dtype); T is not used.
template <typename T>
kernel void srht_tables_k(device float* work [[buffer(0)]], constant SrhtParams& p [[buffer(1)]], SWISK_METAL_COORDS) {
  srht_tables_body(SWISK_METAL_IDX, p, work);
}

#define SWISK_SRHT_INSTANTIATE(T, S)                                                                                 \
  template SWISK_HOST_NAME("swisk_srht_tables_" #S) kernel void srht_tables_k<T>(device float*, constant SrhtParams&, \
                                                                                  SWISK_METAL_COORD_TYPES);       \
  template SWISK_HOST_NAME("swisk_srht_in_" #S) kernel void srht_in_k<T>(device const T*, device float*,            \
                                                                          constant SrhtParams&, SWISK_METAL_COORD_TYPES); \
  template SWISK_HOST_NAME("swisk_srht_out_" #S) kernel void srht_out_k<T>(device const float*, device T*,          \
                                                                            constant SrhtParams&, SWISK_METAL_COORD_TYPES); \
  template SWISK_HOST_NAME("swisk_srht_t_in_" #S) kernel void srht_t_in_k<T>(device const T*, device float*,        \
                                                                              constant SrhtParams&, SWISK_METAL_COORD_TYPES); \
  template SWISK_HOST_NAME("swisk_srht_t_out_" #S) kernel void srht_t_out_k<T>(device const float*, device T*,      \
                                                                                constant SrhtParams&, SWISK_METAL_COORD_TYPES);
SWISK_SRHT_INSTANTIATE(float, f32)
SWISK_SRHT_INSTANTIATE(half, f16)
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310
SWISK_SRHT_INSTANTIATE(bfloat, bf16)
#endif
#undef SWISK_SRHT_INSTANTIATE

#define SWISK_SKETCH_INSTANTIATE(K, N, T, S)                                                       \
  template SWISK_HOST_NAME("swisk_sketch_matrix_" #N "_" #S) kernel void sketch_matrix_k<K, T>( \
      device T*, constant SketchParams&, SWISK_METAL_COORD_TYPES);
// One instantiation per (kind of SWISK_SKETCHES, dtype).
#define SWISK_SKETCH_F32(K, N) SWISK_SKETCH_INSTANTIATE(K, N, float, f32)
#define SWISK_SKETCH_F16(K, N) SWISK_SKETCH_INSTANTIATE(K, N, half, f16)
#define SWISK_SKETCH_BF16(K, N) SWISK_SKETCH_INSTANTIATE(K, N, bfloat, bf16)
SWISK_SKETCHES(SWISK_SKETCH_F32)
SWISK_SKETCHES(SWISK_SKETCH_F16)
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310  // bfloat needs MSL 3.1
SWISK_SKETCHES(SWISK_SKETCH_BF16)
#endif
#undef SWISK_SKETCH_F32
#undef SWISK_SKETCH_F16
#undef SWISK_SKETCH_BF16
#undef SWISK_SKETCH_INSTANTIATE

// Sparse-sign: the table passes (slots work, parameters; one per dtype like the other passes, T unused),
// then the product (x or g, work, out, parameters).
template <typename T>
kernel void sparse_table_k(device uint* work [[buffer(0)]], constant SparseParams& p [[buffer(1)]],
                           SWISK_METAL_COORDS) {
  SWISK_SHARED(sk_u32, taken, SWISK_SKETCH_THREADS * SWISK_SKETCH_MAX_NNZ);
  sparse_table_body(SWISK_METAL_IDX, p, work, taken);
}
template <typename T>
kernel void sparse_sort_k(device uint* work [[buffer(0)]], constant SparseParams& p [[buffer(1)]],
                          SWISK_METAL_COORDS) {
  SWISK_SHARED(sk_u32, row_key, SWISK_SPARSE_SORT);
  SWISK_SHARED(sk_u32, col_key, SWISK_SPARSE_SORT);
  sparse_sort_body(SWISK_METAL_IDX, p, work, row_key, col_key);
}
template <typename T>
kernel void sparse_apply_k(device const T* x [[buffer(0)]], device uint* work [[buffer(1)]],
                           device T* out [[buffer(2)]], constant SparseParams& p [[buffer(3)]], SWISK_METAL_COORDS) {
  SWISK_SHARED(float, xs, SWISK_SPARSE_ROWS * SWISK_SPARSE_COLS);
  sparse_apply_body<T>(SWISK_METAL_IDX, p, x, work, out, xs);
}
template <typename T>
kernel void sparse_sum_k(device const uint* work [[buffer(0)]], device T* out [[buffer(1)]],
                         constant SparseParams& p [[buffer(2)]], SWISK_METAL_COORDS) {
  sparse_sum_body<T>(SWISK_METAL_IDX, p, work, out);
}
template <typename T>
kernel void sparse_apply_t_k(device const T* g [[buffer(0)]], device const uint* work [[buffer(1)]],
                             device T* out [[buffer(2)]], constant SparseParams& p [[buffer(3)]], SWISK_METAL_COORDS) {
  sparse_apply_t_body<T>(SWISK_METAL_IDX, p, g, work, out);
}

#define SWISK_SPARSE_PASS(name, T, S)                                                                     \
  template SWISK_HOST_NAME("swisk_" #name "_" #S) kernel void name##_k<T>(device uint*, constant SparseParams&, \
                                                                          SWISK_METAL_COORD_TYPES);
#define SWISK_SPARSE_INSTANTIATE(T, S)                                                                          \
  SWISK_SPARSE_PASS(sparse_table, T, S)                                                                         \
  SWISK_SPARSE_PASS(sparse_sort, T, S)                                                                          \
  template SWISK_HOST_NAME("swisk_sparse_apply_" #S) kernel void sparse_apply_k<T>(                             \
      device const T*, device uint*, device T*, constant SparseParams&, SWISK_METAL_COORD_TYPES);                \
  template SWISK_HOST_NAME("swisk_sparse_sum_" #S) kernel void sparse_sum_k<T>(                                 \
      device const uint*, device T*, constant SparseParams&, SWISK_METAL_COORD_TYPES);                          \
  template SWISK_HOST_NAME("swisk_sparse_apply_t_" #S) kernel void sparse_apply_t_k<T>(                         \
      device const T*, device const uint*, device T*, constant SparseParams&, SWISK_METAL_COORD_TYPES);
SWISK_SPARSE_INSTANTIATE(float, f32)
SWISK_SPARSE_INSTANTIATE(half, f16)
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310
SWISK_SPARSE_INSTANTIATE(bfloat, bf16)
#endif
#undef SWISK_SPARSE_INSTANTIATE
#undef SWISK_SPARSE_PASS
