// Emulator thunks of the Metal KAN linear kernels: buffers and parameter bytes -> the entry point.
#pragma once

template <typename T>
void kan_forward_thunk(void* const* b, const void* p) {
  kan_forward_k<T>((const T*)b[0], (const T*)b[1], (const T*)b[2], (const T*)b[3], (const T*)b[4], (T*)b[5],
                   *(const KanParams*)p, SWISK_COORDS);
}

template <typename T>
void kan_backward_x_thunk(void* const* b, const void* p) {
  kan_backward_x_k<T>((const T*)b[0], (const T*)b[1], (const T*)b[2], (const T*)b[3], (const T*)b[4],
                      (const T*)b[5], (T*)b[6], *(const KanParams*)p, SWISK_COORDS);
}

template <typename T>
void kan_backward_w_thunk(void* const* b, const void* p) {
  kan_backward_w_k<T>((const T*)b[0], (const T*)b[1], (const T*)b[2], (T*)b[3], (float*)b[4], *(const KanParams*)p,
                      SWISK_COORDS);
}

template <typename T>
void kan_backward_scale_thunk(void* const* b, const void* p) {
  kan_backward_scale_k<T>((const T*)b[0], (const T*)b[1], (const float*)b[2], (T*)b[3], (T*)b[4],
                          *(const KanParams*)p, SWISK_COORDS);
}

#define SWISK_METAL_KAN_KERNELS                                                                           \
  SWISK_EMU_KERNEL(kan_forward, kan_forward_thunk), SWISK_EMU_KERNEL(kan_backward_x, kan_backward_x_thunk), \
      SWISK_EMU_KERNEL(kan_backward_w, kan_backward_w_thunk),                                             \
      SWISK_EMU_KERNEL(kan_backward_scale, kan_backward_scale_thunk)
