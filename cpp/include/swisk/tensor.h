// Torch-free tensor views: what the core knows of a tensor.
#pragma once

#include <cstdint>
#include <string>

namespace swisk {

enum class DType : int { f32 = 0, f64 = 1, f16 = 2, bf16 = 3, i32 = 4, i64 = 5, u8 = 6, boolean = 7 };
enum class Device : int { cpu = 0, cuda = 1, mps = 2 };

const char* dtype_name(DType d);
const char* device_name(Device d);
std::size_t dtype_size(DType d);
inline bool is_floating(DType d) { return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16; }

constexpr int kMaxDims = 8;

// A strided view of memory owned elsewhere (by torch, on the Python side).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int device_index = 0;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements

  int64_t size(int d) const { return shape[d < 0 ? d + ndim : d]; }
  int64_t numel() const;
  bool is_contiguous() const;
  std::string shape_str() const;
  template <typename T> T* ptr() const { return static_cast<T*>(data); }
};

}  // namespace swisk
