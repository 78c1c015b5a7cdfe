// The dialect's math shim on the host (CPU backend, CUDA emulator): float and double overloads.
#pragma once

#include <cmath>
#include <limits>

#define SWISK_HOST_MATH(T)                                                    \
  inline T sk_exp(T x) { return std::exp(x); }                                \
  inline T sk_exp2(T x) { return std::exp2(x); }                              \
  inline T sk_log(T x) { return std::log(x); }                                \
  inline T sk_sinpi(T x) { return T(std::sin(3.14159265358979323846 * double(x))); } \
  inline T sk_cospi(T x) { return T(std::cos(3.14159265358979323846 * double(x))); } \
  inline T sk_cos(T x) { return std::cos(x); }                                \
  inline T sk_sin(T x) { return std::sin(x); }                                \
  inline T sk_sqrt(T x) { return std::sqrt(x); }                              \
  inline T sk_rint(T x) { return std::rint(x); }                              \
  inline T sk_fma(T a, T b, T c) { return std::fma(a, b, c); }                \
  inline T sk_abs(T x) { return std::fabs(x); }                               \
  inline bool sk_isnan(T x) { return std::isnan(x); }                         \
  inline bool sk_isinf(T x) { return std::isinf(x); }                         \
  inline T sk_nan(T) { return std::numeric_limits<T>::quiet_NaN(); }
SWISK_HOST_MATH(float)
SWISK_HOST_MATH(double)
#undef SWISK_HOST_MATH
