// fp16 and bf16 storage types for host code: bits in, float out, round-to-nearest-even back.
#pragma once

#include <cstdint>
#include <cstring>

namespace swisk {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = uint16_t((u >> 16) | 0x40);  // quiet NaN
    } else {
      bits = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  operator float() const { return bits_float(uint32_t(bits) << 16); }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f) {
    uint32_t u = float_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) {
      bits = uint16_t(sign | 0x7e00u);
    } else if (a >= 0x477ff000u) {  // rounds to >= 65520: inf
      bits = uint16_t(sign | 0x7c00u);
    } else if (a < 0x38800000u) {  // below the smallest normal: subnormal or zero
      float m = bits_float(a) * 16777216.0f;  // scale by 2^24: the subnormal's integer mantissa
      uint32_t q = uint32_t(m);
      float r = m - float(q);
      if (r > 0.5f || (r == 0.5f && (q & 1u))) ++q;
      bits = uint16_t(sign | q);
    } else {
      uint32_t e = a + 0xc8000000u;  // rebias exponent 127 -> 15 (in the upper bits)
      uint32_t v = (e + 0xfffu + ((e >> 13) & 1u)) >> 13;
      bits = uint16_t(sign | v);
    }
  }
  operator float() const {
    uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    uint32_t e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0) return bits_float(sign) + (sign ? -1.0f : 1.0f) * float(m) * 5.9604644775390625e-08f;
    if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
  }
};

}  // namespace swisk
