// Host tensors for the C++ tests: a std::vector and the TensorView over it.
#pragma once

#include <initializer_list>
#include <vector>

#include "swisk/tensor.h"

template <typename T>
swisk::DType dtype_of();
template <> inline swisk::DType dtype_of<float>() { return swisk::DType::f32; }
template <> inline swisk::DType dtype_of<double>() { return swisk::DType::f64; }

template <typename T>
swisk::TensorView make_view(std::vector<T>& data, std::initializer_list<int64_t> shape) {
  swisk::TensorView v;
  v.data = data.data();
  v.dtype = dtype_of<T>();
  v.ndim = int(shape.size());
  int d = 0;
  for (int64_t s : shape) v.shape[d++] = s;
  int64_t stride = 1;
  for (d = v.ndim - 1; d >= 0; --d) {
    v.strides[d] = stride;
    stride *= v.shape[d];
  }
  return v;
}

// efficient-kan's default knots: grid_size intervals on [lo, hi], extended by `order` on each side.
inline std::vector<double> uniform_knots(int features, int grid_size, int order, double lo = -1, double hi = 1) {
  std::vector<double> g;
  const double h = (hi - lo) / grid_size;
  for (int f = 0; f < features; ++f)
    for (int t = -order; t <= grid_size + order; ++t) g.push_back(lo + t * h);
  return g;
}
