// Wavelet math (swisk/kernels/wavelet.h), the CPU's vectorisable exp/sin/cos, and the op on every
// host backend.
#include <cmath>
#include <random>

#include "cpu/vec_math.h"
#include "harness.h"
#include "swisk/ops/wavelet.h"
#include "views.h"

using namespace swisk;
using swisk::cpu::CpuVecMath;

namespace {

template <int K, bool D, class M, typename A>
WavVal<A> eval_k(A t) {
  return wavelet_eval<K, D, M, A>(t);
}

// psi (and psi') of wavelet id k, with the CPU's math in double.
WavVal<double> psi(int k, double t) {
  switch (k) {
    case SK_WAV_mexican_hat: return eval_k<SK_WAV_mexican_hat, true, CpuVecMath>(t);
    case SK_WAV_morlet: return eval_k<SK_WAV_morlet, true, CpuVecMath>(t);
    case SK_WAV_dog: return eval_k<SK_WAV_dog, true, CpuVecMath>(t);
    case SK_WAV_meyer: return eval_k<SK_WAV_meyer, true, CpuVecMath>(t);
    default: return eval_k<SK_WAV_shannon, true, CpuVecMath>(t);
  }
}

// The same with the GPUs' math shim, in float.
WavVal<float> psi_device(int k, float t) {
  switch (k) {
    case SK_WAV_mexican_hat: return eval_k<SK_WAV_mexican_hat, true, SkDeviceMath>(t);
    case SK_WAV_morlet: return eval_k<SK_WAV_morlet, true, SkDeviceMath>(t);
    case SK_WAV_dog: return eval_k<SK_WAV_dog, true, SkDeviceMath>(t);
    case SK_WAV_meyer: return eval_k<SK_WAV_meyer, true, SkDeviceMath>(t);
    default: return eval_k<SK_WAV_shannon, true, SkDeviceMath>(t);
  }
}

// Plain libm formulas of Wav-KAN's wavelets in long double, for comparison.
double psi_libm(int k, double td) {
  const long double pi = 3.141592653589793238462643383279502884L, t = td, g = std::exp(-0.5L * t * t);
  if (k == SK_WAV_mexican_hat) return double(2 / (std::sqrt(3.0L) * std::pow(pi, 0.25L)) * (t * t - 1) * g);
  if (k == SK_WAV_morlet) return double(std::cos(5 * t) * g);
  if (k == SK_WAV_dog) return double(-t * g);
  if (k == SK_WAV_meyer) {
    const long double v = std::fabs(t), u = 2 * v - 1;
    const long double nu = u * u * u * u * (35 - 84 * u + 70 * u * u - 20 * u * u * u);
    const long double aux = v <= 0.5L ? 1 : (v >= 1 ? 0 : std::cos(pi / 2 * nu));
    return double(std::sin(pi * v) * aux);
  }
  return t == 0 ? 1 : double(std::sin(t) / t);
}

}  // namespace

TEST(Wavelet, KnownAnswers) {
  EXPECT_NEAR(psi(SK_WAV_mexican_hat, 0).v, -0.8673250705840776, 1e-15);  // Wav-KAN's sign
  EXPECT_NEAR(psi(SK_WAV_mexican_hat, 1).v, 0.0, 1e-16);
  EXPECT_NEAR(psi(SK_WAV_morlet, 0).v, 1.0, 1e-16);
  EXPECT_NEAR(psi(SK_WAV_dog, 1).v, -std::exp(-0.5), 1e-16);
  EXPECT_NEAR(psi(SK_WAV_dog, 0).d, -1.0, 1e-16);
  EXPECT_NEAR(psi(SK_WAV_meyer, 0.25).v, std::sqrt(0.5), 1e-15);
  EXPECT_NEAR(psi(SK_WAV_meyer, 0.75).v, 0.5, 1e-15);  // nu(1/2) = 1/2
  EXPECT_EQ(psi(SK_WAV_meyer, 1.2).v, 0.0);
  EXPECT_EQ(psi(SK_WAV_meyer, 0.0).d, 0.0);  // torch's d|t|/dt at 0
  EXPECT_EQ(psi(SK_WAV_shannon, 0.0).v, 1.0);
  EXPECT_EQ(psi(SK_WAV_shannon, 0.0).d, 0.0);
  for (int k = 0; k < SWISK_NUM_WAVELETS; ++k) EXPECT_NEAR(psi_device(k, 0.3f).v, psi_libm(k, 0.3), 2e-7);
}

TEST(Wavelet, MatchesLibmEverywhere) {
  for (int k = 0; k < SWISK_NUM_WAVELETS; ++k)
    for (int s = -4000; s <= 4000; ++s) {
      const double t = s * 0.004 + 0.0001 * (s % 7);  // [-16, 16], off the grid
      EXPECT_NEAR(psi(k, t).v, psi_libm(k, t), 4e-15);  // meyer: nu(u) cancels near u = 1
      EXPECT_NEAR(psi_device(k, float(t)).v, psi_libm(k, double(float(t))), 3e-6);
    }
  for (int s = -8000; s <= 8000; ++s) {  // the forward's morlet (cos alone), in float, to [-40, 40]
    const float t = float(s) * 0.005f + float(s % 7) * 1e-4f;
    EXPECT_NEAR((eval_k<SK_WAV_morlet, false, CpuVecMath>(t).v), psi_libm(SK_WAV_morlet, double(t)), 4e-7);
  }
  EXPECT_EQ((eval_k<SK_WAV_morlet, false, CpuVecMath>(1e30f).v), 0.0f);
}

TEST(Wavelet, DerivativeMatchesFiniteDifferences) {
  for (int k = 0; k < SWISK_NUM_WAVELETS; ++k)
    for (double t : {-3.1, -1.7, -0.93, -0.61, -0.2, -1e-3, 1e-5, 0.07, 0.3, 0.49, 0.55, 0.8, 0.99, 1.4, 2.6, 7.3}) {
      const double h = 1e-6;
      const double fd = (psi(k, t + h).v - psi(k, t - h).v) / (2 * h);
      EXPECT_NEAR(psi(k, t).d, fd, 2e-8 * (1 + std::fabs(fd)));
      EXPECT_NEAR(psi_device(k, float(t)).d, psi(k, t).d, 3e-5);
    }
}

TEST(Wavelet, VecMathAccuracy) {
  for (int s = 0; s <= 20000; ++s) {
    const double x = -s * 0.037;  // [-740, 0]: into exp's underflow
    const double e = std::exp(x);
    EXPECT_NEAR(cpu::vexp_neg<double>(x), e, 4e-16 * e + (x < -708 ? 1e-307 : 0));
    const float xf = float(x) * 0.1f;
    EXPECT_NEAR(cpu::vexp_neg<float>(xf), std::exp(double(xf)), 2e-7 * std::exp(double(xf)) + 1e-37);
  }
  for (int s = -20000; s <= 20000; ++s) {
    const double x = s * 0.0123;  // [-246, 246]
    auto sc = cpu::vsincos<double>(x);
    EXPECT_NEAR(sc.s, std::sin(x), 3e-16);
    EXPECT_NEAR(sc.c, std::cos(x), 3e-16);
    auto sp = cpu::vsincospi<double>(x * 0.1);
    EXPECT_NEAR(sp.s, double(std::sin(3.141592653589793238462643383279502884L * (x * 0.1))), 3e-16);
    auto sf = cpu::vsincos<float>(float(x));
    EXPECT_NEAR(sf.s, std::sin(double(float(x))), 3e-7);
    EXPECT_NEAR(sf.c, std::cos(double(float(x))), 3e-7);
  }
  EXPECT_TRUE(std::isnan(cpu::vexp_neg<double>(NAN)));
  EXPECT_EQ(cpu::vexp_neg<float>(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(cpu::vsincos<double>(INFINITY).s));
  auto huge = cpu::vsincos<float>(1e30f);  // badly reduced, but bounded
  EXPECT_TRUE(std::fabs(huge.s) <= 1.01f && std::fabs(huge.c) <= 1.01f);
}

namespace {

struct Problem {
  int rows, in, out;
  std::vector<float> x, s, t, w, g;
  explicit Problem(int rows_, int in_, int out_, unsigned seed) : rows(rows_), in(in_), out(out_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> N(0.f, 1.f);
    std::uniform_real_distribution<float> U(0.5f, 2.f);
    x.resize(rows * in), s.resize(out * in), t.resize(out * in), w.resize(out * in), g.resize(rows * out);
    for (auto& v : x) v = 1.5f * N(rng);
    for (auto& v : s) v = U(rng) * (N(rng) < 0 ? -1.f : 1.f);
    for (auto& v : t) v = 0.3f * N(rng);
    for (auto& v : w) v = N(rng);
    for (auto& v : g) v = N(rng);
  }
};

struct Result {
  std::vector<float> y, gx, gs, gt, gw;
};

Result run_op(Problem& P, Backend be, const char* wavelet, bool validate = true) {
  Result r;
  r.y.assign(P.rows * P.out, NAN), r.gx.assign(P.rows * P.in, NAN);
  r.gs.assign(P.out * P.in, NAN), r.gt.assign(P.out * P.in, NAN), r.gw.assign(P.out * P.in, NAN);
  const int64_t R = P.rows, I = P.in, O = P.out;
  WaveletKanArgs a{make_view(P.x, {R, I}), make_view(P.s, {O, I}), make_view(P.t, {O, I}), make_view(P.w, {O, I}),
                   make_view(r.y, {R, O}), wavelet, {}};
  a.launch.backend = be;
  WaveletKanBackwardArgs b{make_view(P.x, {R, I}),  make_view(P.s, {O, I}),  make_view(P.t, {O, I}),
                           make_view(P.w, {O, I}),  make_view(P.g, {R, O}),  make_view(r.gx, {R, I}),
                           make_view(r.gs, {O, I}), make_view(r.gt, {O, I}), make_view(r.gw, {O, I}),
                           wavelet,                 {}};
  b.launch.backend = be;
  if (validate) {
    wavelet_kan(a);
    wavelet_kan_backward(b);
  } else {  // past the data checks, straight to the kernels
    auto c = wavelet_kan_prepare(a, be);
    c->check_data = false;
    run_prepared(*c, "wavelet_kan", {&a.x, &a.scale, &a.translation, &a.weight, &a.out});
    auto cb = wavelet_kan_backward_prepare(b, be);
    cb->check_data = false;
    run_prepared(*cb, "wavelet_kan_backward", {&b.x, &b.scale, &b.translation, &b.weight, &b.grad_out, &b.grad_x,
                                               &b.grad_scale, &b.grad_translation, &b.grad_weight});
  }
  return r;
}

}  // namespace

// cpu, cuda-emu and metal-emu agree on every output, with ragged tiles in every dimension.
TEST(Wavelet, BackendsAgree) {
  Problem P(70, 19, 66, 11);
  for (const char* wavelet : {"mexican_hat", "meyer"}) {
    Result ref = run_op(P, Backend::cpu, wavelet);
    for (Backend be : {Backend::cuda_emu, Backend::metal_emu}) {
      Result r = run_op(P, be, wavelet);
      for (size_t i = 0; i < r.y.size(); ++i) EXPECT_NEAR(r.y[i], ref.y[i], 2e-5 * (1 + std::fabs(ref.y[i])));
      for (size_t i = 0; i < r.gx.size(); ++i) EXPECT_NEAR(r.gx[i], ref.gx[i], 1e-4 * (1 + std::fabs(ref.gx[i])));
      for (size_t i = 0; i < r.gs.size(); ++i) {
        EXPECT_NEAR(r.gs[i], ref.gs[i], 1e-4 * (1 + std::fabs(ref.gs[i])));
        EXPECT_NEAR(r.gt[i], ref.gt[i], 1e-4 * (1 + std::fabs(ref.gt[i])));
        EXPECT_NEAR(r.gw[i], ref.gw[i], 1e-4 * (1 + std::fabs(ref.gw[i])));
      }
    }
  }
}

// A zero scale: the frontend refuses host memory; the GPU kernels (which cannot read it on the host)
// finish and give the inf / NaN the division gives, only where that scale is used.
TEST(Wavelet, ZeroScale) {
  Problem P(5, 3, 2, 5);
  P.s[1 * 3 + 2] = 0;  // scale[1, 2]
  EXPECT_THROW_MSG(run_op(P, Backend::cpu, "dog"), Error, "[wavelet_kan] scale: must be non-zero; scale[1, 2] is 0");
  EXPECT_THROW_MSG(run_op(P, Backend::cuda_emu, "dog"), Error, "scale: must be non-zero");
  for (Backend be : {Backend::cuda_emu, Backend::metal_emu}) {
    Result r = run_op(P, be, "mexican_hat", false);
    for (int n = 0; n < P.rows; ++n) {
      EXPECT_TRUE(std::isfinite(r.y[n * 2 + 0]));
      EXPECT_FALSE(std::isfinite(r.y[n * 2 + 1]));
    }
    EXPECT_FALSE(std::isfinite(r.gw[1 * 3 + 2]));
    EXPECT_TRUE(std::isfinite(r.gw[0 * 3 + 2]) && std::isfinite(r.gs[1 * 3 + 1]));
  }
}

TEST(Wavelet, UnknownNameListsValidOnes) {
  EXPECT_THROW_MSG(wavelet_id("wavelet_kan", "haar"), Error,
                   "[wavelet_kan] wavelet: unknown wavelet 'haar'; valid: mexican_hat, morlet, dog, meyer, shannon");
  EXPECT_EQ(wavelet_id("wavelet_kan", "shannon"), SK_WAV_shannon);
}
