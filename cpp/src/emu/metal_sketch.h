// Emulator thunks of the Metal sketch kernel: buffers and parameter bytes -> the entry point.
#pragma once

template <int K, typename T>
void sketch_matrix_thunk(void* const* b, const void* p) {
  sketch_matrix_k<K, T>((T*)b[0], *(const SketchParams*)p, SWISK_COORDS);
}

#define SWISK_SKETCH_EMU(K, N)                                                  \
  {"swisk_sketch_matrix_" #N "_f32", sketch_matrix_thunk<K, float>},            \
      {"swisk_sketch_matrix_" #N "_f16", sketch_matrix_thunk<K, half>},         \
      {"swisk_sketch_matrix_" #N "_bf16", sketch_matrix_thunk<K, bfloat>},
#define SWISK_METAL_SKETCH_KERNELS SWISK_SKETCHES(SWISK_SKETCH_EMU)
