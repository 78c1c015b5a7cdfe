// The CPU's sin/cos (cpu/vec_math.h) in float against libm's double sin/cos (correctly reduced for
// every argument): the vector path up to sincos_fast_max, the exact one over all finite floats.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/vec_math.h"
#include "harness.h"

using swisk::cpu::CpuVecMath;
using swisk::cpu::CpuVecMathExact;
using swisk::cpu::VecTraits;

namespace {

// |got - want| in units of the float ulp at want.
double ulps(float got, double want) {
  const double a = std::fabs(want);
  const double ulp = a < 0x1p-126 ? 0x1p-149 : std::ldexp(1.0, std::ilogb(a) - 23);
  return std::fabs(double(got) - want) / ulp;
}

// Random floats of every binade, adversarial ones (nearest to k pi/2 and their neighbours, k up to
// 2^128 / pi), powers of two and the hardest known case (16367173 2^72, 2^-29 from a multiple).
std::vector<float> arguments(float lo, float hi) {
  std::mt19937_64 rng(7);
  std::vector<float> xs;
  auto keep = [&](float x) {
    if (std::fabs(x) >= lo && std::fabs(x) <= hi) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  };
  std::uniform_int_distribution<uint32_t> bits(0, 0x7f7fffff);
  for (int i = 0; i < 200000; ++i) keep(__builtin_bit_cast(float, bits(rng)));
  std::uniform_real_distribution<double> u(0, 1);
  const long double pio2 = 1.570796326794896619231321691639751442L;
  for (int i = 0; i < 100000; ++i) {
    const long double k = std::nearbyint(std::pow(2.0L, 128.0L * u(rng) * u(rng)));
    float x = float(k * pio2);
    for (int s = 0; s < 3; ++s, x = std::nextafter(x, 0.0f)) keep(x);
  }
  for (long double k = 1; k < 65536; ++k) keep(float(k * pio2));
  for (int e = -20; e <= 127; ++e) keep(std::ldexp(1.0f, e));
  for (double x = 1e5; x < 3.4e38; x *= 1.37) keep(float(x));
  keep(std::ldexp(16367173.0f, 72));
  keep(std::numeric_limits<float>::max());
  keep(hi);
  return xs;
}

// The largest ulp error of M's sin and cos over xs.
template <class M>
double max_ulps(const std::vector<float>& xs, float* worst) {
  double m = 0;
  for (float x : xs) {
    const double e = std::max(ulps(M::sin(x), std::sin(double(x))), ulps(M::cos(x), std::cos(double(x))));
    if (!(e <= m)) m = e, *worst = x;
  }
  return m;
}

}  // namespace

TEST(VecMath, SinCosFastPathFloat) {
  const float fast_max = VecTraits<float>::sincos_fast_max;
  const std::vector<float> xs = arguments(0.0f, fast_max);
  ASSERT_TRUE(xs.size() > 100000);
  float worst = 0;
  const double m = max_ulps<CpuVecMath>(xs, &worst);
  EXPECT_TRUE(m <= 3.0);
  std::cout << "fast path, |x| <= " << fast_max << ": max " << m << " ulp at " << worst << "\n";
}

TEST(VecMath, SinCosExactEveryFloat) {
  const std::vector<float> xs = arguments(0.0f, std::numeric_limits<float>::max());
  float worst = 0;
  const double m = max_ulps<CpuVecMathExact>(xs, &worst);
  EXPECT_TRUE(m <= 3.0);
  std::cout << "exact, every finite x: max " << m << " ulp at " << worst << "\n";
  // the far path alone (it is what |x| > sincos_far_max uses), from |x| = 1 on
  double far = 0;
  for (float x : arguments(1.0f, std::numeric_limits<float>::max())) {
    const auto sc = swisk::cpu::sincos_far(x);
    far = std::max({far, ulps(sc.s, std::sin(double(x))), ulps(sc.c, std::cos(double(x)))});
  }
  EXPECT_TRUE(far <= 3.0);
  std::cout << "far path, |x| >= 1: max " << far << " ulp\n";
}

TEST(VecMath, SinCosNonFiniteIsNan) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float x : {inf, -inf, nan}) {
    EXPECT_TRUE(std::isnan(CpuVecMathExact::sin(x)));
    EXPECT_TRUE(std::isnan(CpuVecMathExact::cos(x)));
    EXPECT_TRUE(std::isnan(CpuVecMath::sin(x)));
    EXPECT_TRUE(std::isnan(CpuVecMath::cos(x)));
    EXPECT_TRUE(std::isnan(swisk::cpu::sincos_far(x).s));
  }
}

// Loops over the vector path vectorise; they must give what the scalar calls give.
TEST(VecMath, SinCosVectorLoopMatchesScalar) {
  std::vector<float> xs = arguments(0.0f, VecTraits<float>::sincos_fast_max), s(xs.size()), c(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    s[i] = CpuVecMath::sin(xs[i]);
    c[i] = CpuVecMath::cos(xs[i]);
  }
  double m = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    m = std::max({m, ulps(s[i], std::sin(double(xs[i]))), ulps(c[i], std::cos(double(xs[i])))});
  EXPECT_TRUE(m <= 3.0);
}

// double: the vector path to sincos_fast_max, the far one beyond, against long double libm: within
// 2^-52 absolute everywhere and a few ulp away from the zeros.
TEST(VecMath, SinCosExactDouble) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<uint64_t> bits(0, 0x7fefffffffffffffull);
  const long double pio2 = 1.570796326794896619231321691639751442L;
  std::vector<double> xs;
  for (int i = 0; i < 200000; ++i) xs.push_back(__builtin_bit_cast(double, bits(rng)));
  for (long double k = 1; k < 1e6; k = std::ceil(k * 1.01L)) xs.push_back(double(k * pio2));
  for (int e = 0; e <= 1023; ++e) xs.push_back(std::ldexp(1.0, e));
  xs.push_back(std::numeric_limits<double>::max());
  xs.push_back(VecTraits<double>::sincos_fast_max);
  double worst_abs = 0, worst_rel = 0;
  for (double x : xs)
    for (double sx : {x, -x}) {
      const long double rs = std::sin((long double)sx), rc = std::cos((long double)sx);
      const double s = CpuVecMathExact::sin(sx), c = CpuVecMathExact::cos(sx);
      const double ea = double(std::max(std::fabs(s - rs), std::fabs(c - rc)));
      worst_abs = std::max(worst_abs, ea);
      if (std::fabs(rs) > 1e-3L && std::fabs(rc) > 1e-3L)
        worst_rel = std::max(worst_rel, double(std::max(std::fabs(s / rs - 1), std::fabs(c / rc - 1))));
    }
  EXPECT_TRUE(worst_abs <= 0x1p-52);
  EXPECT_TRUE(worst_rel <= 8 * 0x1p-53);
  std::cout << "double: max abs " << worst_abs << ", max rel (|sin|, |cos| > 1e-3) " << worst_rel << "\n";
  EXPECT_TRUE(std::isnan(CpuVecMathExact::sin(std::numeric_limits<double>::infinity())));
}

// morlet's cos(5t): one polynomial after a reduction by pi, within 3e-7 absolute (float; the quadrant
// version's 3 ulp near 1 are 2e-7) and 2^-51 (double) for |x| <= 128; larger finite x give a finite
// value, inf and NaN give NaN.
TEST(VecMath, CosNear) {
  double ef = 0, ed = 0;
  for (int i = -1279000; i <= 1279000; ++i) {
    const float xf = float(i) * 1e-4f + float(i % 13) * 1e-6f;
    ef = std::max(ef, std::fabs(double(swisk::cpu::vcos_near(xf)) - std::cos(double(xf))));
    const double xd = i * 1e-4 + (i % 13) * 1e-6;
    ed = std::max(ed, double(std::fabs(swisk::cpu::vcos_near(xd) - std::cos((long double)xd))));
  }
  for (long double k = 1; k <= 40; ++k) {  // the nearest floats to multiples of pi/2
    const float x = float(k * 1.570796326794896619231321691639751442L);
    ef = std::max(ef, std::fabs(double(swisk::cpu::vcos_near(x)) - std::cos(double(x))));
  }
  EXPECT_TRUE(ef <= 3e-7);
  EXPECT_TRUE(ed <= 0x1p-51);
  std::cout << "cos_near, |x| <= 128: max abs float " << ef << ", double " << ed << "\n";
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {129.0f, -1e30f, std::numeric_limits<float>::max()}) EXPECT_TRUE(std::isfinite(swisk::cpu::vcos_near(x)));
  for (float x : {inf, -inf, std::numeric_limits<float>::quiet_NaN()}) EXPECT_TRUE(std::isnan(swisk::cpu::vcos_near(x)));
}
