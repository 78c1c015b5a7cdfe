// Sketch operators (swisk/kernels/sketch.h): Philox4x32-10's known answers, and the generation kernel
// on every host backend (bitwise the same operator, tiles that agree with the whole, the entry rules).
#include <cmath>
#include <algorithm>
#include <cstring>
#include <vector>

#include "harness.h"
#include "swisk/ops/sketch.h"
#include "views.h"

using namespace swisk;

namespace {

SkU4 u4(sk_u32 x, sk_u32 y, sk_u32 z, sk_u32 w) { return SkU4{x, y, z, w}; }

void expect_words(SkU4 got, SkU4 want) {
  EXPECT_EQ(got.x, want.x);
  EXPECT_EQ(got.y, want.y);
  EXPECT_EQ(got.z, want.z);
  EXPECT_EQ(got.w, want.w);
}

const Backend kHost[] = {Backend::cpu, Backend::cuda_emu, Backend::metal_emu};
constexpr int64_t kSeed = 0x0123456789abcdefLL;

// Tile [r0, r1) x [c0, c1) of the k x n operator on backend be.
template <typename T>
std::vector<T> tile(Backend be, const char* kind, int64_t k, int64_t n, int64_t r0, int64_t r1, int64_t c0,
                    int64_t c1, int64_t nnz = 3, int64_t seed = kSeed) {
  const int64_t size = r1 > r0 && c1 > c0 ? (r1 - r0) * (c1 - c0) : 0;  // bad ranges: refused before use
  std::vector<T> like, out(size_t(size), T(7));                          // 7: unwritten entries show
  SketchMatrixArgs a;
  a.x = make_view(like, {0});
  a.out = make_view(out, {r1 - r0, c1 - c0});
  a.kind = kind;
  a.k = k, a.n = n, a.seed = seed, a.r0 = r0, a.r1 = r1, a.c0 = c0, a.c1 = c1, a.nnz = nnz;
  a.launch.backend = be;
  sketch_matrix(a);
  return out;
}

template <typename T>
std::vector<T> whole(Backend be, const char* kind, int64_t k, int64_t n, int64_t nnz = 3) {
  return tile<T>(be, kind, k, n, 0, k, 0, n, nnz);
}

}  // namespace

// Random123's known-answer vectors for philox4x32_10.
TEST(Sketch, PhiloxKnownAnswers) {
  expect_words(sk_philox4x32_10(u4(0, 0, 0, 0), 0, 0), u4(0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8));
  expect_words(sk_philox4x32_10(u4(~0u, ~0u, ~0u, ~0u), ~0u, ~0u),
               u4(0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd));
  expect_words(sk_philox4x32_10(u4(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), 0xa4093822, 0x299f31d0),
               u4(0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1));
  EXPECT_EQ(sk_mulhi(0xffffffffu, 0xffffffffu), 0xfffffffeu);
}

// The first vector through every backend: Gaussian entry (0, 0) under seed 0 draws counter (0, 0, 0, 0)
// with key (0, 0), so it is Box-Muller of the known words 6627e8d5 and e169c58d (k = 1: unit scale).
TEST(Sketch, KnownAnswerThroughEveryBackend) {
  const float u1 = float((0x6627e8d5u >> 8) + 1) * 0x1p-24f, u2 = float((0xe169c58du >> 8) + 1) * 0x1p-24f;
  const float want = sk_sqrt(-2.0f * sk_log(u1)) * sk_cospi(2.0f * u2);
  EXPECT_NEAR(want, 0.991138, 1e-5);  // by hand: sqrt(-2 ln 0.39904648) cos(2 pi 0.88052022)
  for (Backend be : kHost) EXPECT_EQ(tile<float>(be, "gaussian", 1, 1, 0, 1, 0, 1, 3, 0)[0], want);
}

// Every backend's Rademacher entry (r, c) is bit c mod 32 of word (c / 32) mod 4 of the generator's
// draw for (c / 128, r, 1, 0) under the seed's two key words: the generator runs through cpu, cuda-emu
// and metal-emu. n = 300 covers a partial last group of 128.
TEST(Sketch, RademacherSignsAreThePhiloxBits) {
  const int64_t k = 9, n = 300;
  const float s = float(1.0 / std::sqrt(9.0));
  for (Backend be : kHost) {
    const auto S = whole<float>(be, "rademacher", k, n);
    int negatives = 0;
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < n; ++c) {
        const SkU4 w = sk_philox4x32_10(u4(sk_u32(c / 128), sk_u32(r), SK_SKETCH_rademacher, 0),
                                        sk_u32(kSeed & 0xffffffff), sk_u32(uint64_t(kSeed) >> 32));
        const sk_u32 words[4] = {w.x, w.y, w.z, w.w};
        EXPECT_EQ(S[r * n + c], ((words[(c / 32) % 4] >> (c % 32)) & 1) ? -s : s);
        negatives += S[r * n + c] < 0;
      }
    EXPECT_TRUE(negatives > 1200 && negatives < 1500);  // 2700 fair signs
  }
}

// cpu, cuda-emu and metal-emu give bitwise the same operator, for every kind and 16-bit dtype.
TEST(Sketch, BackendsAgreeBitwise) {
  for (const char* kind : {"gaussian", "rademacher", "sparse_sign"}) {
    const auto ref = whole<float>(Backend::cpu, kind, 37, 530, 5);
    for (Backend be : {Backend::cuda_emu, Backend::metal_emu}) {
      const auto got = whole<float>(be, kind, 37, 530, 5);
      EXPECT_TRUE(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)) == 0);
    }
    // fp64 (CPU): the fp32 values, widened exactly
    const auto wide = whole<double>(Backend::cpu, kind, 37, 530, 5);
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(wide[i], double(ref[i]));
  }
}

// A tile is the block of the whole operator, on every backend, for ragged row and column ranges (the
// second shape's columns start inside one group of 128 Rademacher signs and cross several).
TEST(Sketch, TilesAreBlocksOfTheWhole) {
  struct Shape { int64_t k, n, r0, r1, c0, c1; };
  for (const Shape sh : {Shape{21, 77, 3, 17, 5, 70}, Shape{6, 700, 1, 5, 100, 651}})
  for (const char* kind : {"gaussian", "rademacher", "sparse_sign"}) {
    const int64_t k = sh.k, n = sh.n, r0 = sh.r0, r1 = sh.r1, c0 = sh.c0, c1 = sh.c1;
    const auto S = whole<float>(Backend::cpu, kind, k, n, 4);
    for (Backend be : kHost) {
      const auto T = tile<float>(be, kind, k, n, r0, r1, c0, c1, 4);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) EXPECT_EQ(T[(r - r0) * (c1 - c0) + (c - c0)], S[r * n + c]);
    }
  }
}

// The sparse-sign kernels (no S formed) are x S^T and g S with S from sketch_matrix. The CPU's: row counts
// around the 16 fp32 lanes, columns across its 4096-column tiles, a k small enough for copies of the
// k-side tile (k * 16 * 4 <= 8192 bytes) and one past it. The GPUs' (both emulators): several sorted
// chunks (2048 / nnz columns each, the last partial), rows with no entries (k > n nnz), nnz = k, groups
// of 8 rows (the last partial), 1024-column tiles of x across chunks (nnz = 3: a chunk of 682 columns
// ends inside a tile) and several tiles in a chunk (nnz = 1), a second block of outputs (k > 256,
// partial), a long k (600) for g S. CUDA's emulator takes the shapes its
// rule keeps for the kernels (k / nnz >= 96 for x S^T, 32 for g S: the last five for both), Metal's all.
TEST(Sketch, SparseSignKernelIsTheOperator) {
  struct Shape { int64_t rows, n, k, nnz; };
  for (const Backend be : kHost)
    for (const Shape sh : {Shape{1, 9, 5, 2}, Shape{17, 4200, 129, 8}, Shape{33, 300, 7, 7}, Shape{2, 3, 40, 3},
                           Shape{9, 2100, 20, 4}, Shape{3, 700, 300, 2}, Shape{2, 40, 600, 3},
                           Shape{1, 9, 200, 2}, Shape{33, 300, 100, 1}, Shape{5, 2100, 400, 4},
                           Shape{3, 1500, 300, 3}, Shape{2, 4500, 100, 1}}) {
      const int64_t rows = sh.rows, n = sh.n, k = sh.k;
      if (be != Backend::cpu && rows * n > 20000) continue;  // the emulators: a smaller case
      const auto S = whole<float>(Backend::cpu, "sparse_sign", k, n, sh.nnz);
      std::vector<float> x(size_t(rows * n)), g(size_t(rows * k));
      for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.37 * double(i) + 0.1));
      for (size_t i = 0; i < g.size(); ++i) g[i] = float(std::cos(0.91 * double(i)));
      for (bool transpose : {false, true}) {
        std::vector<float>& in = transpose ? g : x;
        std::vector<float> out(size_t(rows * (transpose ? n : k)), 7.0f);
        SketchArgs a;
        a.x = make_view(in, {rows, transpose ? k : n});
        a.out = make_view(out, {rows, transpose ? n : k});
        a.kind = "sparse_sign";
        a.k = k, a.n = n, a.seed = kSeed, a.nnz = sh.nnz, a.transpose = transpose;
        a.launch.backend = be;
        auto c = sketch_prepare(a, be);
        const bool tiles = be == Backend::cuda_emu && k < (transpose ? 32 : 96) * sh.nnz;  // CUDA's rule
        EXPECT_EQ(c->plan_only, tiles);
        if (tiles) continue;
        std::vector<float> work(size_t(c->work), 5.0f);
        a.work = make_view(work, {int64_t(work.size())});
        run_prepared(*c, transpose ? "sketch_transpose" : "sketch", {&a.x, &a.out, &a.work});
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t o = 0; o < (transpose ? n : k); ++o) {
            double want = 0;
            if (transpose) {
              for (int64_t i = 0; i < k; ++i) want += double(g[r * k + i]) * S[i * n + o];
            } else {
              for (int64_t j = 0; j < n; ++j) want += double(x[r * n + j]) * S[o * n + j];
            }
            EXPECT_NEAR(out[r * (transpose ? n : k) + o], want, 1e-4 * (1 + std::fabs(want)));
          }
      }
    }
}

// Which route prepare picks for sparse-sign (metadata only, no data): swisk's kernels within the
// bounds (the GPUs': n nnz within 2^23, the workspace within 2^24 words, rows of S within 4096 entries;
// CUDA's: k / nnz of at least 96 (x S^T) and 32 (g S) in fp32, 768 and 256 in bf16), with the GPUs'
// workspace as sketch_sparse.h lays it out (x S^T's sums per range of chunks when its blocks are few);
// tiles of S past them.
TEST(Sketch, SparseSignRoutes) {
  struct Case { Backend be; int64_t k, n, nnz; bool half, kernel, kernel_t; };
  const Backend cpu = Backend::cpu, cuda = Backend::cuda_emu, metal = Backend::metal_emu;
  const Case cases[] = {
      {cpu, 1000, 16384, 8, false, true, true},          {cpu, (1 << 18) + 1, 4096, 8, false, false, false},
      {cpu, 16, (1 << 20) + 1, 8, false, false, false},  {cuda, 1000, 16384, 8, false, true, true},
      {metal, 1000, 16384, 8, false, true, true},        {cuda, 16, (1 << 20) + 1, 8, false, false, false},
      {cuda, 1 << 20, 1 << 16, 1, false, false, false},  // 32 chunks x (k + 1) row starts: past 2^24 words
      {cuda, (1 << 18) + 1, 4096, 8, false, true, true},
      {metal, 128, 1 << 16, 8, false, true, true},    // rows of S of 4096 entries
      {metal, 127, 1 << 16, 8, false, false, false},  // 4128: tiles
      {cuda, 767, 16384, 8, false, false, true},      // CUDA's k / nnz: under 96 (x S^T), 32 (g S) at 95.9
      {cuda, 255, 16384, 8, false, false, false},     {cuda, 256, 16384, 8, false, false, true},
      {cuda, 1000, 16384, 8, true, false, false},     // bf16: 768 and 256
      {cuda, 2048, 16384, 8, true, false, true},      {cuda, 6144, 16384, 8, true, true, true},
      {metal, 1000, 16384, 8, true, true, true}};
  std::vector<float> none;
  for (const Case& t : cases)
    for (bool transpose : {false, true}) {
      SketchArgs a;
      a.x = make_view(none, {3, transpose ? t.k : t.n});
      if (t.half) a.x.dtype = DType::bf16;
      a.kind = "sparse_sign";
      a.k = t.k, a.n = t.n, a.seed = kSeed, a.nnz = t.nnz, a.transpose = transpose;
      auto c = sketch_prepare(a, t.be);
      const bool kernel = transpose ? t.kernel_t : t.kernel;
      EXPECT_EQ(c->plan_only, !kernel);
      if (!kernel || t.be == Backend::cpu) continue;
      const int64_t chunk = std::min<int64_t>(t.n, 2048 / t.nnz), chunks = (t.n + chunk - 1) / chunk;
      int64_t sort = 1;
      while (sort < chunk * t.nnz) sort *= 2;
      // x S^T's blocks (outputs / 256 x rows / 8) under 256: ranges of >= 4 chunks, sums within 2^22 values
      const int64_t blocks = (t.k + 255) / 256;
      int64_t splits = std::max<int64_t>(1, std::min({256 / blocks, (chunks + 3) / 4, (int64_t(1) << 22) / (3 * t.k)}));
      splits = (chunks + (chunks + splits - 1) / splits - 1) / ((chunks + splits - 1) / splits);
      const int64_t entries = t.n * t.nnz, sums = splits > 1 ? splits * 3 * t.k : 0;
      EXPECT_EQ(c->work, transpose ? entries : (t.k + 1) * chunks + chunks * sort + sums);
    }
  SketchArgs a;  // more rows than the kernels count: refused before any route
  a.x = make_view(none, {int64_t(1) << 32, 4});
  a.kind = "sparse_sign", a.k = 2, a.nnz = 1;
  EXPECT_THROW_MSG(sketch_prepare(a, Backend::cuda_emu), Error, "[sketch] x: at most 2^32 rows are supported");
}

// Sparse-sign: nnz distinct non-zeros of +-1/sqrt(nnz) in every column; CountSketch at nnz = 1; all
// rows when nnz = k.
TEST(Sketch, SparseSignColumns) {
  for (int64_t nnz : {1, 3, 8, 8}) {
    const int64_t k = nnz == 8 ? 8 : 16, n = 200;
    const float s = float(1.0 / std::sqrt(double(nnz)));
    for (Backend be : kHost) {
      const auto S = whole<float>(be, "sparse_sign", k, n, nnz);
      for (int64_t c = 0; c < n; ++c) {
        int count = 0;
        for (int64_t r = 0; r < k; ++r) {
          const float v = S[r * n + c];
          EXPECT_TRUE(v == 0 || v == s || v == -s);
          count += v != 0;
        }
        EXPECT_EQ(count, int(nnz));
      }
    }
  }
}

TEST(Sketch, GaussianMoments) {
  const int64_t k = 50, n = 2000;
  const auto S = whole<float>(Backend::cpu, "gaussian", k, n);
  double m1 = 0, m2 = 0;
  for (float v : S) m1 += v * std::sqrt(double(k)), m2 += double(v) * v * k;
  m1 /= double(S.size()), m2 /= double(S.size());
  EXPECT_NEAR(m1, 0.0, 0.01);
  EXPECT_NEAR(m2, 1.0, 0.02);
}

TEST(Sketch, SeedsGiveDifferentOperators) {
  const auto a = tile<float>(Backend::cpu, "rademacher", 8, 64, 0, 8, 0, 64, 3, 1);
  const auto b = tile<float>(Backend::cpu, "rademacher", 8, 64, 0, 8, 0, 64, 3, int64_t(1) << 32);  // high word
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  EXPECT_TRUE(differ > 150 && differ < 360);
}

// A stack of terms (a layer's seeded operators in one call): term t is the plain tile of seed
// sketch_term_seed(seed, stream0 + t·stream_step), on every backend and kind, ragged tiles included; the
// seeds are the Python reference's term_seed (values pinned from swisk.reference.sketched).
TEST(Sketch, StackedTermsAreTheTermSeedsOperators) {
  EXPECT_EQ(sketch_term_seed(0, 0), 0x6220a8397b1dcdafull);
  EXPECT_EQ(sketch_term_seed(12345, 7), 0x6e7411b06820371cull);
  EXPECT_EQ(sketch_term_seed((uint64_t(1) << 63) - 1, 0xffffffffull), 0x0b48ce655f564f3dull);
  const int64_t k = 9, n = 300, r0 = 2, r1 = 7, c0 = 5, c1 = 290, terms = 3, stream0 = 1, step = 2;
  const int64_t size = (r1 - r0) * (c1 - c0);
  for (const char* kind : {"gaussian", "rademacher", "sparse_sign"})
    for (Backend be : kHost) {
      std::vector<float> like, out(size_t(terms * size), 7.0f);
      SketchMatrixArgs a;
      a.x = make_view(like, {0});
      a.out = make_view(out, {terms * (r1 - r0), c1 - c0});
      a.kind = kind;
      a.k = k, a.n = n, a.seed = kSeed, a.r0 = r0, a.r1 = r1, a.c0 = c0, a.c1 = c1, a.nnz = 4;
      a.terms = terms, a.stream0 = stream0, a.stream_step = step;
      a.launch.backend = be;
      sketch_matrix(a);
      for (int64_t t = 0; t < terms; ++t) {
        const int64_t seed = int64_t(sketch_term_seed(uint64_t(kSeed), uint64_t(stream0 + t * step)));
        const auto want = tile<float>(be, kind, k, n, r0, r1, c0, c1, 4, seed);
        EXPECT_TRUE(std::memcmp(out.data() + t * size, want.data(), size_t(size) * sizeof(float)) == 0);
      }
    }
}

// The generation body's loop over terms when the grid has fewer rows than the stack (CUDA's y holds
// 65535; 70001 terms would take the emulators minutes): the body run on the host over a grid of 2 x 2
// blocks of 128 threads for 5 terms gives the stacked call's tiles.
template <int K>
static void check_terms_loop(const char* kind) {
  const int64_t terms = 5, r0 = 1, r1 = 6, c0 = 3, c1 = 290, size = (r1 - r0) * (c1 - c0);
  std::vector<float> like, want(size_t(terms * size), 0.0f), got(size_t(terms * size), 0.0f);
  SketchMatrixArgs a;
  a.x = make_view(like, {0});
  a.out = make_view(want, {terms * (r1 - r0), c1 - c0});
  a.kind = kind;
  a.k = 7, a.n = 300, a.seed = kSeed, a.r0 = r0, a.r1 = r1, a.c0 = c0, a.c1 = c1, a.nnz = 3;
  a.terms = terms, a.stream0 = 4, a.stream_step = 3;
  sketch_matrix(a);
  const SketchParams p = sketch_params(a);
  std::vector<sk_u32> taken(SWISK_SKETCH_SHARED(K));
  for (sk_u32 by = 0; by < 2; ++by)
    for (sk_u32 bx = 0; bx < 2; ++bx)
      for (sk_u32 tx = 0; tx < SWISK_SKETCH_THREADS; ++tx)
        sketch_matrix_body<K, float>(SkIdx{tx, 0, bx, by, SWISK_SKETCH_THREADS, 1, 2, 2}, p, got.data(),
                                     taken.data());
  EXPECT_TRUE(got == want);
}

TEST(Sketch, TermsLoopPastTheGridsRows) {
  check_terms_loop<SK_SKETCH_gaussian>("gaussian");
  check_terms_loop<SK_SKETCH_rademacher>("rademacher");
  check_terms_loop<SK_SKETCH_sparse_sign>("sparse_sign");
}

TEST(Sketch, BadArguments) {
  EXPECT_THROW_MSG(tile<float>(Backend::cpu, "haar", 4, 4, 0, 4, 0, 4), Error,
                   "[sketch_matrix] kind: unknown sketch 'haar'; valid: gaussian, rademacher, sparse_sign");
  EXPECT_THROW_MSG(tile<float>(Backend::cpu, "gaussian", 0, 4, 0, 0, 0, 4), Error, "[sketch_matrix] k: must be");
  EXPECT_THROW_MSG(tile<float>(Backend::cpu, "sparse_sign", 4, 4, 0, 4, 0, 4, 5), Error, "[sketch_matrix] nnz:");
  EXPECT_THROW_MSG(tile<float>(Backend::cpu, "sparse_sign", 4, 4, 0, 4, 0, 4, 0), Error, "[sketch_matrix] nnz:");
  EXPECT_THROW_MSG(tile<float>(Backend::cpu, "gaussian", 4, 4, 0, 4, 0, 4, 3, -1), Error, "[sketch_matrix] seed:");
  EXPECT_THROW_MSG(tile<float>(Backend::cpu, "gaussian", 4, 4, 2, 5, 0, 4), Error, "[sketch_matrix] rows:");
  EXPECT_THROW_MSG(tile<float>(Backend::cpu, "gaussian", 4, 4, 0, 4, 3, 2), Error, "[sketch_matrix] cols:");
  EXPECT_THROW_MSG(tile<double>(Backend::cuda_emu, "gaussian", 4, 4, 0, 4, 0, 4), Error, "float64 is not supported");
  {
    std::vector<float> like, out(16);
    SketchMatrixArgs a;
    a.x = make_view(like, {0});
    a.out = make_view(out, {4, 4});
    a.kind = "gaussian";
    a.k = 4, a.n = 4, a.r1 = 4, a.c1 = 4;
    a.terms = -1;
    EXPECT_THROW_MSG(sketch_matrix(a), Error, "[sketch_matrix] terms: must be in [0, 2^20]");
    a.terms = 1, a.stream0 = -1;
    EXPECT_THROW_MSG(sketch_matrix(a), Error, "[sketch_matrix] stream0:");
    a.stream0 = 0, a.stream_step = int64_t(1) << 32;
    EXPECT_THROW_MSG(sketch_matrix(a), Error, "[sketch_matrix] stream_step:");
    a.stream_step = 0, a.terms = int64_t(1) << 20;  // 2^60 entries a term, 2^80 in all: refused, no overflow
    a.k = a.n = a.r1 = a.c1 = int64_t(1) << 30;
    EXPECT_THROW_MSG(sketch_matrix(a), Error, "[sketch_matrix] cols: a tile (all terms) of at most 2^40");
  }
  EXPECT_EQ(sketch_id("sketch", "sparse_sign"), SK_SKETCH_sparse_sign);
}

// The GPU chunk pass's three shared-memory layouts, for chunks of 2^13, 2^14 and 2^15 values, padded
// (CUDA) and swizzled (Metal, 2^13): fwht_slot is the closed form of the slot, each layout covers the
// chunk once, slots stay inside the buffer and are distinct, the last layout is the coalesced order
// t + threads j, and the 32 lanes of every warp hit 32 different banks on every access.
template <bool Pad>
static void check_fwht_layouts(sk_u32 l) {
  const sk_u32 threads = 1u << (l - 5), starts[3] = {0, 5, l - 5}, size = SWISK_FWHT_BUFFER(l, Pad);
  for (sk_u32 s : starts) {
    std::vector<int> seen(size_t(1) << l, 0), used(size, 0);
    for (sk_u32 t = 0; t < threads; ++t)
      for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) {
        const sk_u32 at = fwht_at(t, j, s), slot = fwht_slot<Pad>(t, j, s);
        EXPECT_EQ(slot, Pad ? at + at / 32 : fwht_swizzle(at));
        if (s == l - 5) EXPECT_EQ(at, t + threads * j);
        seen[at] += 1;
        EXPECT_TRUE(slot < size);
        if (slot < size) used[slot] += 1;
      }
    for (int k : seen) EXPECT_EQ(k, 1);
    for (int k : used) EXPECT_TRUE(k <= 1);
    for (sk_u32 w = 0; w < threads / 32; ++w)
      for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) {
        sk_u32 banks = 0;
        for (sk_u32 lane = 0; lane < 32; ++lane) banks |= 1u << (fwht_slot<Pad>(32 * w + lane, j, s) % 32);
        EXPECT_EQ(banks, 0xffffffffu);
      }
  }
}

TEST(Sketch, FwhtChunkLayoutsAreConflictFree) {
  for (sk_u32 l = 13; l <= 15; ++l) check_fwht_layouts<true>(l);
  check_fwht_layouts<false>(13);
  check_fwht_layouts<false>(15);
}

// FWHT of a unit vector e_j is column j of the Sylvester matrix, H[i][j] = (-1)^popcount(i & j), scaled:
// on every backend, within one chunk and past it (register passes).
TEST(Sketch, FwhtOfUnitVectors) {
  for (int64_t n : {1, 8, 8192, 32768}) {
    for (Backend be : kHost) {
      const int64_t j = n / 2 + n / 8;  // a few bits set
      std::vector<float> x(size_t(2 * n), 0.0f), y(size_t(2 * n), 7.0f);
      x[size_t(j)] = 1.0f;
      x[size_t(n + 1 % n)] = 1.0f;  // second row: e_1 (e_0 when n = 1)
      FwhtArgs a;
      a.x = make_view(x, {2, n});
      a.out = make_view(y, {2, n});
      a.scale = 0.5;
      a.launch.backend = be;
      fwht(a);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(y[size_t(i)], __builtin_popcountll(uint64_t(i & j)) % 2 ? -0.5f : 0.5f);
        EXPECT_EQ(y[size_t(n + i)], __builtin_popcountll(uint64_t(i & (1 % n))) % 2 ? -0.5f : 0.5f);
      }
    }
  }
  std::vector<float> x(6), y(6);
  FwhtArgs a;
  a.x = make_view(x, {2, 3});
  a.out = make_view(y, {2, 3});
  EXPECT_THROW_MSG(fwht(a), Error, "[fwht] x: the last dimension must be a power of two below 2^31, got 3");
}

// SRHT on every backend: the transpose is the adjoint (<S x, g> = <x, S^T g>), the backends agree (the
// GPUs' also in passes of fewer rows than x has: the same bits, a smaller workspace), and the kept rows
// carry the norm on average (one x, 64 seeds).
TEST(Sketch, SrhtAdjointAndBackends) {
  const int64_t rows = 3, n = 37, k = 9, N = 64;
  std::vector<float> x(rows * n), g(rows * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.7 * double(i) + 0.3));
  for (size_t i = 0; i < g.size(); ++i) g[i] = float(std::cos(1.3 * double(i)));
  auto run = [&](Backend be, bool transpose, int64_t seed, int64_t work_rows = 0) {
    std::vector<float>& in = transpose ? g : x;
    std::vector<float> out(size_t(rows * (transpose ? n : k)), 7.0f);
    SrhtArgs a;
    a.x = make_view(in, {rows, transpose ? k : n});
    a.out = make_view(out, {rows, transpose ? n : k});
    a.k = k, a.n = n, a.seed = seed, a.transpose = transpose, a.work_rows = work_rows;
    a.launch.backend = be;
    auto c = srht_prepare(a, be);  // the workspace: none on the CPU; a pass's rows and the tables on GPUs
    EXPECT_EQ(c->work, be == Backend::cpu ? 0 : (work_rows ? work_rows : rows) * N + n + (transpose ? N : k));
    std::vector<float> work(size_t(c->work));
    a.work = make_view(work, {c->work});
    run_prepared(*c, transpose ? "srht_transpose" : "srht", {&a.x, &a.out, &a.work});
    return out;
  };
  double norm = 0, x2 = 0;
  for (float v : x) x2 += double(v) * v;
  for (int64_t seed = 0; seed < 64; ++seed) {
    const auto y = run(Backend::cpu, false, seed);
    const auto gx = run(Backend::cpu, true, seed);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < y.size(); ++i) lhs += double(y[i]) * g[i], norm += double(y[i]) * y[i];
    for (size_t i = 0; i < gx.size(); ++i) rhs += double(x[i]) * gx[i];
    EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
    if (seed < 3)
      for (Backend be : {Backend::cuda_emu, Backend::metal_emu}) {
        const auto ye = run(be, false, seed), ge = run(be, true, seed);
        for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(ye[i], y[i], 1e-5);
        for (size_t i = 0; i < gx.size(); ++i) EXPECT_NEAR(ge[i], gx[i], 1e-5);
        EXPECT_TRUE(run(be, false, seed, 2) == ye);  // passes of 2 rows and 1
        EXPECT_TRUE(run(be, true, seed, 1) == ge);
      }
  }
  EXPECT_NEAR(norm / 64 / x2, 1.0, 0.15);
}
