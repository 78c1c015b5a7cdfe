// Emulator thunks of the Metal sketch kernel: buffers and parameter bytes -> the entry point.
#pragma once

template <int K, typename T>
void sketch_matrix_thunk(void* const* b, const void* p) {
  sketch_matrix_k<K, T>((T*)b[0], *(const SketchParams*)p, SWISK_COORDS);
}

template <typename T>
void fwht_shared_thunk(void* const* b, const void* p) {
  fwht_shared_k<T>((const T*)b[0], (T*)b[1], *(const FwhtParams*)p, SWISK_COORDS);
}

template <typename T>
void fwht_stage_thunk(void* const* b, const void* p) {
  fwht_stage_k<T>((T*)b[0], *(const FwhtParams*)p, SWISK_COORDS);
}

#define SWISK_SRHT_THUNK(name, A, B)                                               \
  template <typename T>                                                            \
  void name##_thunk(void* const* b, const void* p) {                               \
    name##_k<T>((A)b[0], (B)b[1], *(const SrhtParams*)p, SWISK_COORDS);            \
  }
SWISK_SRHT_THUNK(srht_in, const T*, float*)
SWISK_SRHT_THUNK(srht_out, const float*, T*)
SWISK_SRHT_THUNK(srht_t_in, const T*, float*)
SWISK_SRHT_THUNK(srht_t_out, const float*, T*)
#undef SWISK_SRHT_THUNK

template <typename T>
void srht_tables_thunk(void* const* b, const void* p) {
  srht_tables_k<T>((float*)b[0], *(const SrhtParams*)p, SWISK_COORDS);
}

#define SWISK_SPARSE_THUNK(name)                             \
  template <typename T>                                      \
  void name##_thunk(void* const* b, const void* p) {         \
    name##_k<T>((uint*)b[0], *(const SparseParams*)p, SWISK_COORDS); \
  }
SWISK_SPARSE_THUNK(sparse_table)
SWISK_SPARSE_THUNK(sparse_sort)
#undef SWISK_SPARSE_THUNK

template <typename T>
void sparse_apply_thunk(void* const* b, const void* p) {
  sparse_apply_k<T>((const T*)b[0], (uint*)b[1], (T*)b[2], *(const SparseParams*)p, SWISK_COORDS);
}
template <typename T>
void sparse_sum_thunk(void* const* b, const void* p) {
  sparse_sum_k<T>((const uint*)b[0], (T*)b[1], *(const SparseParams*)p, SWISK_COORDS);
}
template <typename T>
void sparse_apply_t_thunk(void* const* b, const void* p) {
  sparse_apply_t_k<T>((const T*)b[0], (const uint*)b[1], (T*)b[2], *(const SparseParams*)p, SWISK_COORDS);
}

#define SWISK_SKETCH_EMU(K, N)                                                  \
  {"swisk_sketch_matrix_" #N "_f32", sketch_matrix_thunk<K, float>},            \
      {"swisk_sketch_matrix_" #N "_f16", sketch_matrix_thunk<K, half>},         \
      {"swisk_sketch_matrix_" #N "_bf16", sketch_matrix_thunk<K, bfloat>},
#define SWISK_METAL_SKETCH_KERNELS                                                              \
  SWISK_SKETCHES(SWISK_SKETCH_EMU) SWISK_EMU_KERNEL(fwht_shared, fwht_shared_thunk),             \
      SWISK_EMU_KERNEL(fwht_stage, fwht_stage_thunk), SWISK_EMU_KERNEL(srht_in, srht_in_thunk),       \
      SWISK_EMU_KERNEL(srht_out, srht_out_thunk), SWISK_EMU_KERNEL(srht_t_in, srht_t_in_thunk),        \
      SWISK_EMU_KERNEL(srht_t_out, srht_t_out_thunk), SWISK_EMU_KERNEL(srht_tables, srht_tables_thunk),    \
      SWISK_EMU_KERNEL(sparse_table, sparse_table_thunk), SWISK_EMU_KERNEL(sparse_sort, sparse_sort_thunk),   \
      SWISK_EMU_KERNEL(sparse_apply, sparse_apply_thunk), SWISK_EMU_KERNEL(sparse_sum, sparse_sum_thunk), \
      SWISK_EMU_KERNEL(sparse_apply_t, sparse_apply_t_thunk),
