#include <sstream>

#include "swisk/registry.h"

namespace swisk {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::boolean: return "bool";
  }
  return "unknown";
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::u8: case DType::boolean: return 1;
  }
  return 0;
}

const char* device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
    case Device::mps: return "mps";
  }
  return "unknown";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  if (numel() == 0) return true;  // as torch: an empty tensor is contiguous whatever its strides
  int64_t expect = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

std::string TensorView::shape_str() const {
  std::ostringstream os;
  os << "(";
  for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << shape[d];
  os << (ndim == 1 ? ",)" : ")");
  return os.str();
}

}  // namespace swisk
