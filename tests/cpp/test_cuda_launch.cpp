// Launch paths of the CUDA backend on the emulator: device guard, grids within CUDA's limits, tiled
// bodies that loop over every tile of a capped grid, 64-bit column counts, the runtime check.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "emu/cuda_shim.h"
#include "cuda/launch.h"
#include "harness.h"
#include "swisk/kernels/kan_mma.h"
#include "swisk/ops/bspline.h"
#include "swisk/ops/kan.h"
#include "swisk/ops/wavelet.h"
#include "views.h"

using namespace swisk;
using emu::Dim3;

namespace {

struct Kan {  // a KAN layer of `rows x in -> out` with default knots
  KanParams p{};
  std::vector<float> x, grid, bw, sw, sc, gy;
  Kan(unsigned rows, unsigned in, unsigned out, unsigned grid_size = 5, unsigned order = 3) {
    p = KanParams{rows, in, out, grid_size + 2 * order + 1, order, grid_size + order, 1, 1};
    std::mt19937 rng(rows * 131 + in * 7 + out);
    std::normal_distribution<float> N(0, 1);
    for (double g : uniform_knots(int(in), int(grid_size), int(order))) grid.push_back(float(g));
    auto fill = [&](std::vector<float>& v, size_t n) { for (size_t e = 0; e < n; ++e) v.push_back(N(rng)); };
    fill(x, size_t(rows) * in), fill(bw, size_t(out) * in), fill(sc, size_t(out) * in);
    fill(sw, size_t(out) * in * p.n_basis), fill(gy, size_t(rows) * out);
  }
};

std::vector<float> nans(size_t n) { return std::vector<float>(n, NAN); }

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The scalar KAN bodies run on grid `g` (16x16 blocks); outputs start as NaN.
std::vector<float> kan_forward(const Kan& k, Dim3 g) {
  auto y = nans(size_t(k.p.rows) * k.p.out);
  emu::launch(g, Dim3(SWISK_KAN_TILE, SWISK_KAN_TILE), [&] {
    SWISK_SHARED(float, sv, SWISK_KAN_TILE * SWISK_KAN_TILE * SWISK_KAN_LOCAL);
    SWISK_SHARED(sk_i32, ss, SWISK_KAN_TILE * SWISK_KAN_TILE);
    kan_forward_body<float>(cuda_emu::cuda_idx(), k.p, k.x.data(), k.grid.data(), k.bw.data(), k.sw.data(),
                            k.sc.data(), y.data(), sv, ss);
  });
  return y;
}

std::vector<float> kan_backward_x(const Kan& k, Dim3 g) {
  auto gx = nans(size_t(k.p.rows) * k.p.in);
  emu::launch(g, Dim3(SWISK_KAN_TILE, SWISK_KAN_TILE), [&] {
    SWISK_SHARED(float, gt, SWISK_KAN_TILE * SWISK_KAN_TILE);
    kan_backward_x_body<float>(cuda_emu::cuda_idx(), k.p, k.x.data(), k.grid.data(), k.bw.data(), k.sw.data(),
                               k.sc.data(), k.gy.data(), gx.data(), gt);
  });
  return gx;
}

std::vector<float> kan_backward_w(const Kan& k, Dim3 g) {  // grad_bw then ws, concatenated
  auto out = nans(size_t(k.p.out) * k.p.in * (k.p.n_basis + 1));
  float *gbw = out.data(), *ws = out.data() + size_t(k.p.out) * k.p.in;
  emu::launch(g, Dim3(SWISK_KAN_TILE, SWISK_KAN_TILE), [&] {
    SWISK_SHARED(float, at, SWISK_KAN_TILE * SWISK_KAN_TILE);
    SWISK_SHARED(float, gt, SWISK_KAN_TILE * SWISK_KAN_TILE);
    kan_backward_w_body<float>(cuda_emu::cuda_idx(), k.p, k.x.data(), k.grid.data(), k.gy.data(), gbw, ws, at, gt);
  });
  return out;
}

// The tensor-core bodies (their scalar twin here), fp32 as tf32, 128-thread blocks.
std::vector<float> kan_mma_forward(const Kan& k, Dim3 g) {
  std::vector<float> wp(kan_mma_packed(k.p.in, k.p.out, k.p.n_basis));
  emu::launch(Dim3(4), Dim3(256), [&] {
    kan_mma_pack_body<float>(cuda_emu::cuda_idx(), k.p, k.bw.data(), k.sw.data(), k.sc.data(), wp.data());
  });
  auto y = nans(size_t(k.p.rows) * k.p.out);
  emu::launch(g, Dim3(SWISK_KAN_MMA_THREADS), [&] {
    SWISK_SHARED_ALIGNED(float, as, SWISK_KAN_MMA_BM * SWISK_KAN_MMA_BK);
    SWISK_SHARED_ALIGNED(float, bs, SWISK_KAN_MMA_BN * SWISK_KAN_MMA_BK);
    SWISK_SHARED_ALIGNED(float, cs, SWISK_KAN_MMA_BM * SWISK_KAN_MMA_BN);
    kan_mma_forward_body<float>(cuda_emu::cuda_idx(), k.p, k.x.data(), k.grid.data(), wp.data(), y.data(), as, bs, cs);
  });
  return y;
}

std::vector<float> kan_mma_backward_w(const Kan& k, Dim3 g) {
  std::vector<sk_half> x(k.x.begin(), k.x.end()), grid(k.grid.begin(), k.grid.end()), gy(k.gy.begin(), k.gy.end());
  std::vector<sk_half> gbw(size_t(k.p.out) * k.p.in, sk_half(NAN));
  auto ws = nans(size_t(k.p.out) * k.p.in * k.p.n_basis);
  emu::launch(g, Dim3(SWISK_KAN_MMA_THREADS), [&] {
    SWISK_SHARED_ALIGNED(sk_half, as, SWISK_KAN_MMA_BM * SWISK_KAN_MMA_BK);
    SWISK_SHARED_ALIGNED(sk_half, bs, SWISK_KAN_MMA_BN * SWISK_KAN_MMA_BK);
    SWISK_SHARED_ALIGNED(float, cs, SWISK_KAN_MMA_BM * SWISK_KAN_MMA_BN);
    kan_mma_backward_w_body<sk_half>(cuda_emu::cuda_idx(), k.p, x.data(), grid.data(), gy.data(), gbw.data(),
                                     ws.data(), as, bs, cs);
  });
  for (const sk_half& v : gbw) ws.push_back(float(v));
  return ws;
}

bool all_finite(const std::vector<float>& v) {
  for (float e : v)
    if (!std::isfinite(e)) return false;
  return true;
}

}  // namespace

// A grid smaller than the tile count in x and in y (as when CUDA's limits cap it) still covers every
// output: each body loops over tiles in both dimensions and gives the full grid's bits.
TEST(CudaLaunch, ScalarKanBodiesLoopOverCappedGrids) {
  const Kan k(40, 37, 35);  // 3 tiles of 16 each way; 37 * 9 columns: 21 column tiles
  const auto y = kan_forward(k, Dim3(3, 3)), gx = kan_backward_x(k, Dim3(3, 3)), w = kan_backward_w(k, Dim3(21, 3));
  EXPECT_TRUE(all_finite(y) && all_finite(gx) && all_finite(w));
  for (Dim3 g : {Dim3(1, 1), Dim3(2, 1), Dim3(1, 2)}) {
    EXPECT_TRUE(same(kan_forward(k, g), y));
    EXPECT_TRUE(same(kan_backward_x(k, g), gx));
    EXPECT_TRUE(same(kan_backward_w(k, g), w));
  }
}

TEST(CudaLaunch, TensorCoreKanBodiesLoopOverCappedGrids) {
  const Kan k(130, 20, 130);  // 3 tiles of 64 rows and outputs; 20 * 9 = 180 columns: 3 tiles
  const auto y = kan_mma_forward(k, Dim3(3, 3)), w = kan_mma_backward_w(k, Dim3(3, 3));
  EXPECT_TRUE(all_finite(y) && all_finite(w));
  EXPECT_TRUE(same(kan_mma_forward(k, Dim3(1, 1)), y));
  EXPECT_TRUE(same(kan_mma_forward(k, Dim3(2, 2)), y));
  EXPECT_TRUE(same(kan_mma_backward_w(k, Dim3(1, 1)), w));
}

// Grids stay within gridDim.x < 2^31 and gridDim.y <= 65535 however large the problem.
TEST(CudaLaunch, GridsStayWithinCudaLimits) {
  const KanParams big{0xffffffffu, 1u << 28, 0xffffffffu, 24, 3, 20, 1, 1};
  for (SkGrid g : {kan_forward_grid(big), kan_backward_x_grid(big), kan_backward_w_grid(big), kan_mma_forward_grid(big),
                   kan_mma_backward_w_grid(big)}) {
    EXPECT_TRUE(g.x >= 1 && g.x <= 0x7fffffffu);
    EXPECT_TRUE(g.y >= 1 && g.y <= 65535u);
  }
  const KanParams five_m{1, 8, 5000000, 12, 3, 8, 1, 1};  // 5M outputs: 78125 tiles of 64, over the y limit
  EXPECT_EQ(kan_mma_forward_grid(five_m).y, 65535u);
  EXPECT_EQ(kan_forward_grid(five_m).y, 65535u);
  const KanParams small{100, 8, 40, 12, 3, 8, 1, 1};  // uncapped: one block per tile
  EXPECT_EQ(kan_forward_grid(small).x, 7u);
  EXPECT_EQ(kan_forward_grid(small).y, 3u);
  EXPECT_EQ(kan_backward_w_grid(small).x, 5u);  // 8 * 9 = 72 columns
  EXPECT_EQ(kan_mma_forward_grid(small).x, 2u);
  EXPECT_EQ(sk_tile_grid(0, 0).x, 1u);
}

// in·(n_basis+1) past 2^32 (2^28 features, 15 bases): the packed widths are 64-bit.
TEST(CudaLaunch, PackedColumnCountsAre64Bit) {
  EXPECT_EQ(kan_mma_cpad(1u << 28, 15), 1ull << 32);
  EXPECT_EQ(kan_mma_packed(1u << 28, 3, 15), 3ull << 32);
  EXPECT_EQ(kan_mma_cpad(3, 8), 32ull);
}

// Every CUDA op launches on its tensors' device and gives the caller's device back (the emulated
// current device stands in for cudaGetDevice / cudaSetDevice).
TEST(CudaLaunch, LaunchesRunUnderTheTensorsDevice) {
  Kan k(5, 4, 3);
  const int64_t R = 5, I = 4, O = 3, K = k.p.n_knots, NB = k.p.n_basis;
  std::vector<float> y(R * O), gx(R * I), gbw(O * I), gsw(O * I * NB), gsc(O * I), basis(R * I * NB), gb(R * I);
  std::vector<float> work(size_t(kan_linear_workspace(I, O, NB, 3, DType::f32, Backend::cuda_emu, true)) + 1);
  auto on1 = [](TensorView v) {
    v.device_index = 1;
    return v;
  };
  auto check = [&](const char* what, auto&& run) {
    emu_cuda_device() = EmuCudaDevice{0, -1};
    run();
    EXPECT_EQ(emu_cuda_device().last_launch, 1);
    EXPECT_EQ(emu_cuda_device().current, 0);
    if (emu_cuda_device().last_launch != 1) std::fprintf(stderr, "  op: %s\n", what);
  };
  const TensorView x = on1(make_view(k.x, {R, I})), grid = on1(make_view(k.grid, {I, K}));
  KanLinearArgs f;
  f.x = x, f.grid = grid, f.base_weight = on1(make_view(k.bw, {O, I})), f.spline_weight = on1(make_view(k.sw, {O, I, NB}));
  f.spline_scaler = on1(make_view(k.sc, {O, I})), f.out = on1(make_view(y, {R, O}));
  f.work = on1(make_view(work, {int64_t(work.size())})), f.launch.backend = Backend::cuda_emu;
  check("kan_linear", [&] { kan_linear(f); });
  KanLinearBackwardArgs b;
  b.x = x, b.grid = grid, b.base_weight = f.base_weight, b.spline_weight = f.spline_weight;
  b.spline_scaler = f.spline_scaler, b.grad_out = on1(make_view(k.gy, {R, O})), b.grad_x = on1(make_view(gx, {R, I}));
  b.grad_base_weight = on1(make_view(gbw, {O, I})), b.grad_spline_weight = on1(make_view(gsw, {O, I, NB}));
  b.grad_spline_scaler = on1(make_view(gsc, {O, I})), b.work = f.work, b.launch.backend = Backend::cuda_emu;
  check("kan_linear_backward", [&] { kan_linear_backward(b); });

  BsplineBasisArgs bs;
  bs.x = x, bs.grid = grid, bs.out = on1(make_view(basis, {R, I, NB})), bs.launch.backend = Backend::cuda_emu;
  check("bspline_basis", [&] { bspline_basis(bs); });
  BsplineContractArgs bb;
  bb.x = x, bb.grid = grid, bb.grad = on1(make_view(basis, {R, I * NB})), bb.grad_x = on1(make_view(gb, {R, I}));
  bb.launch.backend = Backend::cuda_emu;
  check("bspline_contract", [&] { bspline_contract(bb); });

  std::vector<float> scale(O * I, 1.5f), wy(R * O), wgx(R * I), ws(O * I), wt(O * I), ww(O * I);
  WaveletKanArgs wf;
  wf.x = x, wf.scale = on1(make_view(scale, {O, I})), wf.translation = f.spline_scaler, wf.weight = f.base_weight;
  wf.out = on1(make_view(wy, {R, O})), wf.wavelet = "morlet", wf.launch.backend = Backend::cuda_emu;
  check("wavelet_kan", [&] { wavelet_kan(wf); });
  WaveletKanBackwardArgs wb;
  wb.x = x, wb.scale = wf.scale, wb.translation = wf.translation, wb.weight = wf.weight, wb.grad_out = b.grad_out;
  wb.grad_x = on1(make_view(wgx, {R, I})), wb.grad_scale = on1(make_view(ws, {O, I}));
  wb.grad_translation = on1(make_view(wt, {O, I})), wb.grad_weight = on1(make_view(ww, {O, I}));
  wb.wavelet = "morlet", wb.launch.backend = Backend::cuda_emu;
  check("wavelet_kan_backward", [&] { wavelet_kan_backward(wb); });
  emu_cuda_device() = EmuCudaDevice{};
}

// The reason CUDA cannot run: an old driver names both versions; a new enough one gives "".
TEST(CudaLaunch, RuntimeVersionCheck) {
  const std::string old = cuda_version_problem(12040, 13000, 1);
  EXPECT_TRUE(old.find("12.4") != std::string::npos && old.find("13.0") != std::string::npos);
  EXPECT_TRUE(old.find("R580") != std::string::npos);
  EXPECT_EQ(cuda_version_problem(13000, 13000, 1), "");
  EXPECT_EQ(cuda_version_problem(13020, 13000, 2), "");  // minor-version compatibility
  EXPECT_TRUE(cuda_version_problem(0, 13000, 0).find("no NVIDIA driver") != std::string::npos);
  EXPECT_TRUE(cuda_version_problem(13000, 13000, 0).find("no CUDA device") != std::string::npos);
  EXPECT_EQ(cuda_version_str(12040), "12.4");
}
