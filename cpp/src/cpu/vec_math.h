// exp / sin / cos as straight-line polynomial code (no libm calls, selects instead of branches), so
// GCC vectorises loops over them; float and double, within a few ulp on the ranges the kernels use.
#pragma once

#include <cstdint>

#define SK_VEC_INLINE inline __attribute__((always_inline))

namespace swisk::cpu {

template <typename A>
struct VecTraits;
template <>
struct VecTraits<float> {
  using U = uint32_t;
  static constexpr int mant = 23, bias = 127, exp_deg = 7, sin_deg = 9;
  static constexpr float shift = 0x1.8p23f;  // adding it rounds to an integer held in the low bits
  static constexpr float exp_lo = -87.0f;    // e^x below it flushes to 0
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  static constexpr float pio2_1 = 1.5703125f, pio2_2 = 4.837512969970703125e-4f, pio2_3 = 7.54978995489188216e-8f;
};
template <>
struct VecTraits<double> {
  using U = uint64_t;
  static constexpr int mant = 52, bias = 1023, exp_deg = 13, sin_deg = 15;
  static constexpr double shift = 0x1.8p52;
  static constexpr double exp_lo = -708.0;
  static constexpr double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  static constexpr double pio2_1 = 1.57079632673412561417e+00, pio2_2 = 6.07710050630396597660e-11,
                          pio2_3 = 2.02226624879595063154e-21;
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
  const A nps = -ps, npc = -pc;
  const typename V::U m = q & 3;  // quadrant: sin = ps, pc, -ps, -pc; cos = pc, -ps, -pc, ps
  const A s = m == 0 ? ps : (m == 1 ? pc : (m == 2 ? nps : npc));
  const A c = m == 0 ? pc : (m == 1 ? nps : (m == 2 ? npc : ps));
  return {s, c};
}

// sin and cos of x.
template <typename A>
SK_VEC_INLINE VecSinCos<A> vsincos(A x) {
  using V = VecTraits<A>;
  const A kd = x * A(0.63661977236758134308) + V::shift;
  const A q = kd - V::shift;
  const A r = ((x - q * V::pio2_1) - q * V::pio2_2) - q * V::pio2_3;
  return vsincos_quadrant<A>(r, __builtin_bit_cast(typename V::U, kd));
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
};

}  // namespace swisk::cpu
