// Runtime dtype -> template parameter (host code of every backend).
#pragma once

#include "swisk/error.h"
#include "swisk/kernels/dialect.h"
#include "swisk/tensor.h"

namespace swisk {

// Calls f(T{}) with T the storage type of a floating dtype; AllowDouble=false for GPU kernels.
template <bool AllowDouble, class F>
void dispatch_float(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::f32: f(float{}); return;
    case DType::f16: f(sk_half{}); return;
    case DType::bf16: f(sk_bfloat{}); return;
    case DType::f64:
      if constexpr (AllowDouble) {
        f(double{});
        return;
      }
      break;
    default: break;
  }
  fail(ErrorKind::type, op, "dtype", "unsupported dtype ", dtype_name(d));
}

template <typename T>
inline auto float_of(T v) {
  return static_cast<typename sk_acc<T>::type>(v);
}

}  // namespace swisk
