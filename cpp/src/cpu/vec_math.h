// The CPU loops' vectors, SK_VEC_BYTES wide: 32 (one AVX2 register; AVX-512 clones have 32 of them),
// or 64 in the files built a second time for AVX-512 (cpu/wide/: one zmm register), each build in its
// own inline namespace (w32, w64) so that no symbol of one stands for the other; and exp / sin / cos
// as straight-line polynomial code (no libm calls, selects instead of branches), so GCC vectorises
// loops over them; float and double, within a few ulp on the ranges the kernels use.
// vsincos is exact in its reduction only for |x| <= VecTraits::sincos_fast_max; sincos_far (scalar,
// Payne–Hanek) serves larger arguments, and CpuVecMathExact picks between the two per value.
#pragma once

#include <cstdint>
#include <utility>

#define SK_VEC_INLINE inline __attribute__((always_inline))

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"  // the vectors never cross a call: always inlined into the clones
#endif

#ifndef SK_VEC_BYTES
#define SK_VEC_BYTES 32
#define SK_VEC_ABI w32
#endif

namespace swisk::cpu {
inline namespace SK_VEC_ABI {

// VecW<A>: SK_VEC_BYTES of A, and the integer lane indices of a same-shaped shuffle (GCC's __builtin_shuffle
// takes them as a vector: GCC 11 has no __builtin_shufflevector; clang has no __builtin_shuffle).
template <typename A> struct VecW;
template <> struct VecW<float> {
  typedef float type __attribute__((vector_size(SK_VEC_BYTES)));
  typedef int32_t index __attribute__((vector_size(SK_VEC_BYTES)));
};
template <> struct VecW<double> {
  typedef double type __attribute__((vector_size(SK_VEC_BYTES)));
  typedef int64_t index __attribute__((vector_size(SK_VEC_BYTES)));
};
// 32 bytes but in the AVX-512 build: GCC splits a 64-byte vector on an AVX2 clone through the stack (a
// scalar's broadcast as 16 stores, accumulators reloaded per operation); the fused kan_linear forward
// ran ~10x slower than the GEMM route on an AVX2 EPYC (2026-11-27), while 32-byte vectors give plain
// ymm code.
template <typename A> using VW = typename VecW<A>::type;
template <typename A> constexpr int64_t kLanes = int64_t(SK_VEC_BYTES / sizeof(A));

template <typename A> SK_VEC_INLINE VW<A> vload(const A* p) { VW<A> v; __builtin_memcpy(&v, p, SK_VEC_BYTES); return v; }
template <typename A> SK_VEC_INLINE void vstore(A* p, VW<A> v) { __builtin_memcpy(p, &v, SK_VEC_BYTES); }

// Two-source lane shuffle: lane l of the result is (a ++ b)[idx[l]], indices known at compile time.
template <typename A, int... I>
SK_VEC_INLINE VW<A> vshuffle2(VW<A> a, VW<A> b) {
#if defined(__clang__)
  return __builtin_shufflevector(a, b, I...);
#else
  return __builtin_shuffle(a, b, typename VecW<A>::index{I...});
#endif
}

// One step of vtranspose: within every 2H x 2H block, swap the off-diagonal H x H blocks.
template <int H, typename A, int... I>
SK_VEC_INLINE void vtranspose_step(VW<A>* v, std::integer_sequence<int, I...>) {
  constexpr int L = int(kLanes<A>);
  for (int k = 0; k < L; ++k) {
    if (k & H) continue;
    const VW<A> a = v[k], b = v[k + H];
    v[k] = vshuffle2<A, ((I & H) ? L + I - H : I)...>(a, b);
    v[k + H] = vshuffle2<A, ((I & H) ? L + I : I + H)...>(a, b);
  }
}

// v[0, lanes): a lanes x lanes matrix by rows, transposed in registers (lanes · log2(lanes) shuffles).
template <typename A>
SK_VEC_INLINE void vtranspose(VW<A>* v) {
  using S = std::make_integer_sequence<int, int(kLanes<A>)>;
  if constexpr (kLanes<A> > 8) vtranspose_step<8, A>(v, S{});
  if constexpr (kLanes<A> > 4) vtranspose_step<4, A>(v, S{});
  vtranspose_step<2, A>(v, S{});
  vtranspose_step<1, A>(v, S{});
}

// v + v with lane l paired to lane l ^ H.
template <int H, typename A, int... I>
SK_VEC_INLINE VW<A> vfold(VW<A> v, std::integer_sequence<int, I...>) {
  return v + vshuffle2<A, (I ^ H)...>(v, v);
}

// The sum of v's lanes, as a tree of halves (log2(lanes) shuffles and adds).
template <typename A>
SK_VEC_INLINE A vsum(VW<A> v) {
  using S = std::make_integer_sequence<int, int(kLanes<A>)>;
  if constexpr (kLanes<A> > 8) v = vfold<8, A>(v, S{});
  if constexpr (kLanes<A> > 4) v = vfold<4, A>(v, S{});
  v = vfold<2, A>(v, S{});
  v = vfold<1, A>(v, S{});
  return v[0];
}

// The first n (<= lanes) elements at p, zeros after; and a store of the first n lanes.
template <typename A>
SK_VEC_INLINE VW<A> vload_part(const A* p, int64_t n) {
  if (n == kLanes<A>) return vload(p);
  A t[kLanes<A>] = {};
  for (int64_t l = 0; l < n; ++l) t[l] = p[l];
  return vload(t);
}
template <typename A>
SK_VEC_INLINE void vstore_part(A* p, VW<A> v, int64_t n) {
  if (n == kLanes<A>) return vstore(p, v);
  for (int64_t l = 0; l < n; ++l) p[l] = v[l];
}

template <typename A>
struct VecTraits;
template <>
struct VecTraits<float> {
  using U = uint32_t;
  static constexpr int mant = 23, bias = 127, exp_deg = 7, sin_deg = 9, cos_deg = 12;
  static constexpr float shift = 0x1.8p23f;  // adding it rounds to an integer held in the low bits
  static constexpr float exp_lo = -87.0f;    // e^x below it flushes to 0
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  // pi/2 = pio2_1 + pio2_2 + pio2_3 + pio2_4 to 2^-81: the first three hold 12 bits each, so q pio2_k
  // is exact for q <= 2^12, and the reduction errs by < 2^-47 up to sincos_fast_max.
  static constexpr float pio2_1 = 0x1.922p0f, pio2_2 = -0x1.2aep-18f, pio2_3 = -0x1.deap-31f,
                         pio2_4 = 0x1.184698p-44f;
  static constexpr float sincos_fast_max = 6400.0f;  // < (2^12 - 1/2) pi/2
};
template <>
struct VecTraits<double> {
  using U = uint64_t;
  static constexpr int mant = 52, bias = 1023, exp_deg = 13, sin_deg = 15, cos_deg = 20;
  static constexpr double shift = 0x1.8p52;
  static constexpr double exp_lo = -708.0;
  static constexpr double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  static constexpr double pio2_1 = 1.57079632673412561417e+00, pio2_2 = 6.07710050630396597660e-11,
                          pio2_3 = 2.02226624879595063154e-21, pio2_4 = 0.0;
  // pio2_1, pio2_2 hold 33 bits: exact products for q < 2^20, and the reduction errs by < 2^-100
  static constexpr double sincos_fast_max = 1.6e6;
};

// Taylor coefficients 1/k! (exp) and (-1)^k/(2k+1)!, (-1)^k/(2k)! (sin, cos), built at compile time.
template <typename A, int N>
struct VecCoefs {
  A exp[N + 1], sin[N / 2 + 1], cos[N / 2 + 2];
  constexpr VecCoefs() : exp{}, sin{}, cos{} {
    A f = A(1);
    cos[0] = A(1);
    for (int k = 0; k <= N + 1; ++k) {
      if (k > 0) f /= A(k);
      if (k <= N) exp[k] = f;
      const A sgn = (k / 2) % 2 ? A(-1) : A(1);
      if (k % 2) sin[k / 2] = sgn * f;
      else cos[k / 2] = sgn * f;
    }
  }
};

// e^x for x <= 0 (Cody–Waite reduction, Taylor polynomial, exponent built from the integer bits).
template <typename A>
SK_VEC_INLINE A vexp_neg(A x) {
  using V = VecTraits<A>;
  using U = typename V::U;
  const A xc = x < V::exp_lo ? V::exp_lo : x;  // NaN stays NaN
  const A kd = xc * A(1.4426950408889634) + V::shift;
  const A n = kd - V::shift;
  const A r = (xc - n * V::ln2_hi) - n * V::ln2_lo;
  constexpr VecCoefs<A, V::exp_deg> C;
  A p = C.exp[V::exp_deg];
  for (int k = V::exp_deg - 1; k >= 0; --k) p = p * r + C.exp[k];
  const U bits = (__builtin_bit_cast(U, kd) + U(V::bias)) << V::mant;
  const A e = p * __builtin_bit_cast(A, bits);  // computed before the select: no branch to vectorise
  return x < V::exp_lo ? A(0) : e;
}

template <typename A>
struct VecSinCos {
  A s, c;
};

// sin and cos of q pi/2 + r, |r| <= pi/4 (clamped so that a huge, badly reduced argument stays bounded).
template <typename A>
SK_VEC_INLINE VecSinCos<A> vsincos_quadrant(A r, typename VecTraits<A>::U q) {
  using V = VecTraits<A>;
  r = r > A(1) ? A(1) : (r < A(-1) ? A(-1) : r);
  const A r2 = r * r;
  constexpr VecCoefs<A, V::sin_deg> C;
  A ps = C.sin[V::sin_deg / 2], pc = C.cos[V::sin_deg / 2 + 1];
  for (int k = V::sin_deg / 2 - 1; k >= 0; --k) ps = ps * r2 + C.sin[k];
  for (int k = V::sin_deg / 2; k >= 0; --k) pc = pc * r2 + C.cos[k];
  ps *= r;
  // quadrant q: sin = ps, pc, -ps, -pc; cos = pc, -ps, -pc, ps (odd q swaps, bit 1 of q / q + 1 negates)
  using U = typename V::U;
  constexpr int top = 8 * sizeof(U) - 2;
  const bool odd = q & 1;
  const A s = odd ? pc : ps, c = odd ? ps : pc;
  return {__builtin_bit_cast(A, __builtin_bit_cast(U, s) ^ ((q & 2) << top)),
          __builtin_bit_cast(A, __builtin_bit_cast(U, c) ^ (((q + 1) & 2) << top))};
}

// sin and cos of x.
template <typename A>
SK_VEC_INLINE VecSinCos<A> vsincos(A x) {
  using V = VecTraits<A>;
  const A kd = x * A(0.63661977236758134308) + V::shift;
  const A q = kd - V::shift;
  A r = ((x - q * V::pio2_1) - q * V::pio2_2) - q * V::pio2_3;
  if constexpr (V::pio2_4 != A(0)) r -= q * V::pio2_4;
  return vsincos_quadrant<A>(r, __builtin_bit_cast(typename V::U, kd));
}

// cos(x) alone for |x| <= 128 (morlet's cos(5t), whose envelope is 0 past |t| = 13.2): x = k pi + r,
// |r| <= pi/2, cos x = (-1)^k cos r by one even Taylor polynomial, within ~2^-22 absolute (float).
// Larger finite x give cos 0, inf and NaN give NaN.
template <typename A>
SK_VEC_INLINE A vcos_near(A x) {
  using V = VecTraits<A>;
  using U = typename V::U;
  x = x < A(-128) || x > A(128) ? x * A(0) : x;
  const A kd = x * A(0.31830988618379067154) + V::shift;
  const A k = kd - V::shift;
  const A r = ((x - k * (A(2) * V::pio2_1)) - k * (A(2) * V::pio2_2)) - k * (A(2) * V::pio2_3);  // k <= 41: exact
  const A r2 = r * r;
  constexpr VecCoefs<A, V::cos_deg - 1> C;
  A p = C.cos[V::cos_deg / 2];
  for (int j = V::cos_deg / 2 - 1; j >= 0; --j) p = p * r2 + C.cos[j];
  return __builtin_bit_cast(A, __builtin_bit_cast(U, p) ^ (__builtin_bit_cast(U, kd) << (8 * sizeof(U) - 1)));
}

// x = (q + f) pi/2 with |f| <= 1/2, for x = m 2^e, m < 2^53 an integer, |x| >= 1 (Payne–Hanek): x 2/pi
// mod 4 needs only the 192 bits of 2/pi from 2^-(e-1) on (earlier bits give multiples of 4, later ones
// < 2^-137). Returns r = f pi/2 to about 1 ulp of double.
inline double reduce_far(uint64_t m, int e, uint32_t* q) {
  // 2/pi in binary: bits 2^-1 .. 2^-1280, 64 to a word
  static constexpr uint64_t two_over_pi[20] = {
      0xA2F9836E4E441529, 0xFC2757D1F534DDC0, 0xDB6295993C439041, 0xFE5163ABDEBBC561, 0xB7246E3A424DD2E0,
      0x06492EEA09D1921C, 0xFE1DEB1CB129A73E, 0xE88235F52EBB4484, 0xE99C7026B45F7E41, 0x3991D639835339F4,
      0x9C845F8BBDF9283B, 0x1FF897FFDE05980F, 0xEF2F118B5A0A6D1F, 0x6D367ECF27CB09B7, 0x4F463F669E5FEA2D,
      0x7527BAC7EBE5F17B, 0x3D0739F78A5292EA, 0x6BFB5FB11F8D5D08, 0x56033046FC7B6BAB, 0xF0CFBC209AF4361D};
  using u128 = unsigned __int128;
  // W = bits j0 .. j0 + 191 of 2/pi (bit j weighs 2^-j, none for j < 1), j0 = e - 1, as W[0] (top) .. W[2]
  const int j0 = e - 1, w0 = j0 - 1 >= 0 ? (j0 - 1) / 64 : -((64 - j0) / 64), sh = (j0 - 1) - 64 * w0;
  uint64_t a[4], W[3];
  for (int k = 0; k < 4; ++k) a[k] = w0 + k >= 0 && w0 + k < 20 ? two_over_pi[w0 + k] : 0;
  for (int k = 0; k < 3; ++k) W[k] = sh ? (a[k] << sh) | (a[k + 1] >> (64 - sh)) : a[k];
  // P = m W mod 2^192 (higher bits are multiples of 4) as limbs P2..P0; x 2/pi = P 2^-190 (mod 4)
  const u128 p0 = u128(m) * W[2], p1 = u128(m) * W[1], p2 = u128(m) * W[0];
  const u128 c = (p0 >> 64) + uint64_t(p1);
  const u128 d = (p1 >> 64) + uint64_t(p2) + (c >> 64);
  const uint64_t P0 = uint64_t(p0), P1 = uint64_t(c), P2 = uint64_t(d);
  // the 128 fraction bits below the quadrant, signed: rounds to the nearest quadrant
  const uint64_t hi = (P2 << 2) | (P1 >> 62), lo = (P1 << 2) | (P0 >> 62);
  *q = uint32_t(P2 >> 62) + uint32_t(hi >> 63);
  const __int128 F = __int128((u128(hi) << 64) | lo) >> 1;  // |F| <= 2^126: double(F) stays in range
  const double fa = double(F), fb = double(F - __int128(fa));  // F = fa + fb to 2^-106
  // r = F 2^-127 (pio2_hi + pio2_lo); the terms below fa pio2_hi's rounding, for what they add
  const double A = fa * 0x1p-127, B = fb * 0x1p-127;
  return A * 0x1.921fb54442d18p+0 + (A * 0x1.1a62633145c07p-54 + B * 0x1.921fb54442d18p+0);
}

// sin and cos of x with |x| >= 1, reduced exactly (scalar; for the rare far arguments). NaN for inf, NaN.
template <typename A>
__attribute__((noinline)) VecSinCos<A> sincos_far(A x) {
  using V = VecTraits<A>;
  using U = typename V::U;
  if (!(x - x == A(0))) return {x - x, x - x};
  constexpr int ebits = 8 * int(sizeof(A)) - 1 - V::mant;
  const U bits = __builtin_bit_cast(U, x), be = (bits >> V::mant) & ((U(1) << ebits) - 1);
  const uint64_t m = uint64_t(bits & ((U(1) << V::mant) - 1)) | (be ? uint64_t(1) << V::mant : 0);
  uint32_t q;
  const double r = reduce_far(m, int(be ? be : 1) - V::bias - V::mant, &q);
  const bool neg = bits >> (8 * sizeof(A) - 1);
  return vsincos_quadrant<A>(A(neg ? -r : r), U(neg ? 0u - q : q));
}

// sin and cos of any x: the vector reduction where it is exact, else the far one.
template <typename A>
inline VecSinCos<A> vsincos_exact(A x) {
  return (x < A(0) ? -x : x) <= VecTraits<A>::sincos_fast_max ? vsincos<A>(x) : sincos_far<A>(x);
}

// sin(pi x) and cos(pi x): x = q/2 + r exactly, so no error grows with |x|.
template <typename A>
SK_VEC_INLINE VecSinCos<A> vsincospi(A x) {
  using V = VecTraits<A>;
  const A kd = x * A(2) + V::shift;
  const A q = kd - V::shift;
  const A r = x - q * A(0.5);
  return vsincos_quadrant<A>(r * A(3.14159265358979323846), __builtin_bit_cast(typename V::U, kd));
}

// The math policy of wavelet_eval on the CPU.
struct CpuVecMath {
  template <typename A>
  static SK_VEC_INLINE A gauss(A t2) { return vexp_neg<A>(A(-0.5) * t2); }
  template <typename A>
  static SK_VEC_INLINE A sin(A x) { return vsincos<A>(x).s; }
  template <typename A>
  static SK_VEC_INLINE A cos(A x) { return vsincos<A>(x).c; }
  template <typename A>
  static SK_VEC_INLINE A sinpi(A x) { return vsincospi<A>(x).s; }
  template <typename A>
  static SK_VEC_INLINE A cospi(A x) { return vsincospi<A>(x).c; }
  template <typename A>
  static SK_VEC_INLINE A cos_near(A x) { return vcos_near<A>(x); }
};

// The same with sin and cos exact for every argument (scalar: the rows that hold far arguments).
struct CpuVecMathExact : CpuVecMath {
  template <typename A>
  static A sin(A x) { return vsincos_exact<A>(x).s; }
  template <typename A>
  static A cos(A x) { return vsincos_exact<A>(x).c; }
};

}  // inline namespace SK_VEC_ABI
}  // namespace swisk::cpu
