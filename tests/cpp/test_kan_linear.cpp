// The fused KAN linear op on every host backend against a naive fp64 evaluation of the same math.
#include <algorithm>
#include <cmath>
#include <random>

#include "harness.h"
#include "swisk/ops/kan.h"
#include "views.h"

using namespace swisk;

namespace {

struct Problem {
  int rows = 29, in = 18, out = 17, grid_size = 6, order = 3;
  bool uniform = false;  // uniform knots (the CPU kernels' vector-lane bases), else random spacings
  int nk() const { return grid_size + 2 * order + 1; }
  int nb() const { return grid_size + order; }
  std::vector<double> x, grid, bw, sw, sc, gy;

  explicit Problem(unsigned seed) { fill(seed); }
  Problem(unsigned seed, int r, int i, int o, int g, int k, bool u = false)
      : rows(r), in(i), out(o), grid_size(g), order(k), uniform(u) {
    fill(seed);
  }
  void fill(unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> N(0, 1);
    std::uniform_real_distribution<double> U(0.05, 1.0);
    for (int i = 0; i < in; ++i) {
      double acc = -0.6 * nk();
      for (int t = 0; t < nk(); ++t) grid.push_back(uniform ? (t - 0.5 * (nk() - 1)) * 0.6 : acc += U(rng));
    }
    for (int n = 0; n < rows; ++n)
      for (int i = 0; i < in; ++i) x.push_back(n == 0 ? grid[i * nk()] : n == 1 ? grid[i * nk() + nk() - 1] : 3 * N(rng));
    for (int e = 0; e < out * in; ++e) bw.push_back(N(rng)), sc.push_back(N(rng));
    for (int e = 0; e < out * in * nb(); ++e) sw.push_back(N(rng));
    for (int e = 0; e < rows * out; ++e) gy.push_back(N(rng));
  }
  double basis(int n, int i, int j, bool deriv) const {
    auto b = bspline_local<double>(x[n * in + i], grid.data() + i * nk(), nk(), order, deriv);
    return bspline_pick<double>(deriv ? b.d : b.v, b.span, j);
  }
  double y(int n, int o) const {
    double acc = 0;
    for (int i = 0; i < in; ++i) {
      const double xv = x[n * in + i];
      acc += xv / (1 + std::exp(-xv)) * bw[o * in + i];
      for (int j = 0; j < nb(); ++j) acc += basis(n, i, j, false) * sw[(o * in + i) * nb() + j] * sc[o * in + i];
    }
    return acc;
  }
};

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// Runs forward and backward of problem P on backend B in dtype T; checks against the fp64 sums.
template <typename T>
void check_backend(const Problem& P, Backend be, double tol) {
  auto x = cast<T>(P.x), grid = cast<T>(P.grid), bw = cast<T>(P.bw), sw = cast<T>(P.sw), sc = cast<T>(P.sc);
  auto gy = cast<T>(P.gy);
  std::vector<T> y(P.rows * P.out), gx(P.rows * P.in), gbw(bw.size()), gsw(sw.size()), gsc(sc.size());
  std::vector<T> work(size_t(std::max(kan_linear_workspace(P.in, P.out, P.nb(), P.order, dtype_of<T>(), be, false),
                                      kan_linear_workspace(P.in, P.out, P.nb(), P.order, dtype_of<T>(), be, true))) +
                      1);
  const int64_t R = P.rows, I = P.in, O = P.out, K = P.nk(), NB = P.nb();
  KanLinearArgs f{make_view(x, {R, I}), make_view(grid, {I, K}), make_view(bw, {O, I}), make_view(sw, {O, I, NB}),
                  make_view(sc, {O, I}), make_view(y, {R, O}), make_view(work, {int64_t(work.size())}), P.order, {}};
  f.launch.backend = be;
  kan_linear(f);
  double scale = 0;
  for (int n = 0; n < P.rows; ++n)
    for (int o = 0; o < P.out; ++o) scale = std::fmax(scale, std::fabs(P.y(n, o)));
  for (int n = 0; n < P.rows; ++n)
    for (int o = 0; o < P.out; ++o) EXPECT_NEAR(y[n * P.out + o], P.y(n, o), tol * scale);

  KanLinearBackwardArgs b{f.x, f.grid, f.base_weight, f.spline_weight, f.spline_scaler, make_view(gy, {R, O}),
                          make_view(gx, {R, I}), make_view(gbw, {O, I}), make_view(gsw, {O, I, NB}),
                          make_view(gsc, {O, I}), f.work, P.order, {}};
  b.launch.backend = be;
  kan_linear_backward(b);
  for (int n = 0; n < P.rows; ++n)
    for (int i = 0; i < P.in; ++i) {  // dx = sum_o gy (silu' bw + sum_j B'_j sw sc)
      const double xv = P.x[n * P.in + i], s = 1 / (1 + std::exp(-xv)), ds = s * (1 + xv * (1 - s));
      double want = 0;
      for (int o = 0; o < P.out; ++o) {
        double w = ds * P.bw[o * P.in + i];
        for (int j = 0; j < P.nb(); ++j)
          w += P.basis(n, i, j, true) * P.sw[(o * P.in + i) * P.nb() + j] * P.sc[o * P.in + i];
        want += P.gy[n * P.out + o] * w;
      }
      EXPECT_NEAR(gx[n * P.in + i], want, tol * 10 * (1 + std::fabs(want)));
    }
  for (int o = 0; o < P.out; ++o)
    for (int i = 0; i < P.in; ++i) {
      double wb = 0, wsc = 0;
      for (int n = 0; n < P.rows; ++n) {
        const double xv = P.x[n * P.in + i], g = P.gy[n * P.out + o];
        wb += g * xv / (1 + std::exp(-xv));
        for (int j = 0; j < P.nb(); ++j) wsc += g * P.basis(n, i, j, false) * P.sw[(o * P.in + i) * P.nb() + j];
      }
      EXPECT_NEAR(gbw[o * P.in + i], wb, tol * 10 * (1 + std::fabs(wb)));
      EXPECT_NEAR(gsc[o * P.in + i], wsc, tol * 10 * (1 + std::fabs(wsc)));
      for (int j = 0; j < P.nb(); ++j) {
        double w = 0;
        for (int n = 0; n < P.rows; ++n) w += P.gy[n * P.out + o] * P.basis(n, i, j, false) * P.sc[o * P.in + i];
        EXPECT_NEAR(gsw[(o * P.in + i) * P.nb() + j], w, tol * 10 * (1 + std::fabs(w)));
      }
    }
}

}  // namespace

TEST(KanLinear, CpuFp64MatchesNaiveSums) { check_backend<double>(Problem(11), Backend::cpu, 1e-12); }

// The CPU kernels in chunks of a quarter of the layer's weights (kan_cpu_chunk_bytes, 4 (backward 0.5) to 16 MiB):
// fp64, 700 -> 1003, 3 weight rows per feature, 5.4 MB: four output chunks in the forward (320 ×
// 3, then 5 vectors and a lane tail), nine feature chunks in the backward (80 × 8, then 60).
TEST(KanLinear, CpuFp64InChunks) {
  const Problem P(13, 3, 700, 1003, 1, 1);
  EXPECT_EQ(kan_cpu_chunk_bytes(P.in, P.out, P.nb(), 8), int64_t(700) * 1003 * 4 * 8 / 4);
  EXPECT_EQ(kan_cpu_chunk_bytes(64, 64, 8, 4), kKanCpuChunkMin);
  EXPECT_EQ(kan_cpu_chunk_bytes(64, 64, 8, 4, true), kKanCpuBackChunkMin);
  EXPECT_EQ(kan_cpu_chunk_bytes(1568, 64, 8, 4, true), int64_t(1568) * 64 * 10 * 4 / 4);
  EXPECT_EQ(kan_cpu_chunk_bytes(4096, 4096, 8, 4), kKanCpuChunkMax);
  EXPECT_EQ(kan_cpu_layout(P.in, P.out, P.nb(), P.order, DType::f64, false).outc, 320);
  EXPECT_EQ(kan_cpu_layout(P.in, P.out, P.nb(), P.order, DType::f64, true).inc, 80);
  check_backend<double>(P, Backend::cpu, 1e-12);
}

// Fewer features than vector lanes on uniform knots: the CPU kernels evaluate the bases over (row,
// feature) pairs laid end to end, blocks of lanes spanning rows (300 rows: past a 128-row block).
TEST(KanLinear, CpuFewFeaturesUniformKnots) {
  for (int in : {1, 3, 7}) {
    const Problem P(19 + in, 300, in, 9, 5, 3, true);
    check_backend<double>(P, Backend::cpu, 1e-12);
    check_backend<float>(P, Backend::cpu, 2e-5);
  }
}

TEST(KanLinear, EveryBackendFp32MatchesNaiveSums) {
  const Problem P(5);
  for (Backend be : {Backend::cpu, Backend::cuda_emu, Backend::metal_emu}) check_backend<float>(P, be, 2e-5);
}

TEST(KanLinear, BadInputsThrow) {
  Problem P(3);
  auto& x = P.x;
  std::vector<double> y(P.rows * P.out), work(kan_linear_workspace(P.in, P.out, P.nb(), P.order, DType::f64, Backend::cpu, false));
  const int64_t R = P.rows, I = P.in, O = P.out, K = P.nk(), NB = P.nb();
  auto args = [&] {
    KanLinearArgs a{make_view(x, {R, I}), make_view(P.grid, {I, K}), make_view(P.bw, {O, I}),
                    make_view(P.sw, {O, I, NB}), make_view(P.sc, {O, I}), make_view(y, {R, O}),
                    make_view(work, {int64_t(work.size())}), P.order, {}};
    return a;
  };
  auto a = args();
  a.base_weight.shape[1] = I - 1;
  EXPECT_THROW_MSG(kan_linear(a), Error, "[kan_linear] base_weight: must be (out, in)");
  a = args();
  a.order = 2;
  EXPECT_THROW_MSG(kan_linear(a), Error, "[kan_linear] spline_weight: must be (out, in, n_basis)");
  a = args();
  a.work.shape[0] = 3;
  EXPECT_THROW_MSG(kan_linear(a), Error, "[kan_linear] work: needs");
  a = args();
  a.out.shape[1] = O + 1;
  EXPECT_THROW_MSG(kan_linear(a), Error, "[kan_linear] out: must have shape");
  a = args();
  std::vector<float> xf(x.begin(), x.end());
  a.x = make_view(xf, {R, I});
  EXPECT_THROW_MSG(kan_linear(a), Error, "[kan_linear] grid: dtype float64 differs from x's float32");
  a = args();
  P.grid[5] = P.grid[4];
  EXPECT_THROW_MSG(kan_linear(a), Error, "knots must be strictly increasing; row 0 is not at index 5");
}

// bspline_local_k (the CPU's order-templated bases) agrees with bspline_local for every order.
template <int K>
void check_local_k(std::mt19937& rng) {
  std::uniform_real_distribution<double> U(0.05, 1.0);
  std::vector<double> g(10 + 2 * K);
  double acc = -4;
  for (auto& k : g) k = (acc += U(rng));
  const int n = int(g.size());
  std::vector<double> inv(std::max(K, 1) * n);
  for (int k = 1; k <= K; ++k)
    for (int j = 0; j + k < n; ++j) inv[(k - 1) * n + j] = 1 / (g[j + k] - g[j]);
  std::uniform_real_distribution<double> X(g[0] - 1, g[n - 1] + 1);
  for (int s = 0; s < 300; ++s) {
    const double x = s < n ? g[s] : X(rng);  // every knot, then anywhere
    double v[K + 1], dv[K + 1];
    const int span = bspline_local_k<K>(x, g.data(), inv.data(), n, v, dv);
    auto b = bspline_local<double>(x, g.data(), n, K, true);
    EXPECT_EQ(span, b.span);
    for (int q = 0; q <= K && span >= 0; ++q) {
      const int j = span - K + q;
      if (j < 0 || j >= n - 1 - K) {  // no such basis: both zero
        EXPECT_EQ(v[q], 0.0);
        EXPECT_EQ(dv[q], 0.0);
        continue;
      }
      EXPECT_NEAR(v[q], bspline_pick<double>(b.v, b.span, j), 1e-13);
      EXPECT_NEAR(dv[q], bspline_pick<double>(b.d, b.span, j), 1e-11 * (1 + std::fabs(dv[q])));
    }
  }
}

TEST(KanLinear, LocalBasesMatchCoxDeBoorForEveryOrder) {
  std::mt19937 rng(17);
  check_local_k<0>(rng);
  check_local_k<1>(rng);
  check_local_k<2>(rng);
  check_local_k<3>(rng);
  check_local_k<4>(rng);
  check_local_k<5>(rng);
  check_local_k<6>(rng);
  check_local_k<7>(rng);
}
