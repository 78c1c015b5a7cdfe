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

#define SWISK_SKETCH_EMU(K, N)                                                  \
  {"swisk_sketch_matrix_" #N "_f32", sketch_matrix_thunk<K, float>},            \
      {"swisk_sketch_matrix_" #N "_f16", sketch_matrix_thunk<K, half>},         \
      {"swisk_sketch_matrix_" #N "_bf16", sketch_matrix_thunk<K, bfloat>},
#define SWISK_METAL_SKETCH_KERNELS                                                              \
  SWISK_SKETCHES(SWISK_SKETCH_EMU) SWISK_EMU_KERNEL(fwht_shared, fwht_shared_thunk),             \
      SWISK_EMU_KERNEL(fwht_stage, fwht_stage_thunk),
