// Frontends of the sketch ops: validate once (prepare), then launch.
#include "swisk/ops/sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "validate.h"

namespace swisk {

#define SK_SKETCH_NAME(id, name) #name,
static constexpr const char* kSketchNames[] = {SWISK_SKETCHES(SK_SKETCH_NAME)};
#undef SK_SKETCH_NAME

static constexpr bool same_name(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
#define SK_SKETCH_IN_ORDER(id, name) \
  static_assert(same_name(kSketchNames[id], #name), "SWISK_SKETCHES: ids must be 0, 1, ... in order");
SWISK_SKETCHES(SK_SKETCH_IN_ORDER)
#undef SK_SKETCH_IN_ORDER

const char* sketch_name(int id) { return kSketchNames[id]; }

const char* sketch_names() {
  static const std::string all = [] {
    std::string s;
    for (const char* n : kSketchNames) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }();
  return all.c_str();
}

int sketch_id(const char* op, const std::string& name) {
  for (int k = 0; k < SWISK_NUM_SKETCHES; ++k)
    if (name == kSketchNames[k]) return k;
  fail(ErrorKind::value, op, "kind", "unknown sketch '", name, "'; valid: ", sketch_names());
}

static constexpr int64_t kMaxDim = int64_t(1) << 31;

// The operator's own arguments: kind, k, n, seed, nnz.
static void check_operator(const char* op, const std::string& kind, int64_t k, int64_t n, int64_t seed, int64_t nnz) {
  const int id = sketch_id(op, kind);
  SWISK_CHECK(k >= 1 && k < kMaxDim, value, op, "k", "must be in [1, 2^31), got ", k);
  SWISK_CHECK(n >= 1 && n < kMaxDim, value, op, "n", "must be in [1, 2^31), got ", n);
  SWISK_CHECK(seed >= 0, value, op, "seed", "must be a non-negative int below 2^63, got ", seed);
  if (id == SK_SKETCH_sparse_sign)
    SWISK_CHECK(nnz >= 1 && nnz <= k && nnz <= SWISK_SKETCH_MAX_NNZ, value, op, "nnz", "must be in [1, min(k, ",
                SWISK_SKETCH_MAX_NNZ, ")] = [1, ", std::min<int64_t>(k, SWISK_SKETCH_MAX_NNZ), "], got ", nnz);
}

SketchParams sketch_params(const SketchMatrixArgs& a) {
  SketchParams p{};
  p.k = sk_u32(a.k);
  p.n = sk_u32(a.n);
  p.r0 = sk_u32(a.r0);
  p.rows = sk_u32(a.r1 - a.r0);
  p.c0 = sk_u32(a.c0);
  p.cols = sk_u32(a.c1 - a.c0);
  p.seed_lo = sk_u32(uint64_t(a.seed) & 0xffffffffu);
  p.seed_hi = sk_u32(uint64_t(a.seed) >> 32);
  p.kind = sk_u32(sketch_id("sketch_matrix", a.kind));
  p.nnz = p.kind == SK_SKETCH_sparse_sign ? sk_u32(a.nnz) : 0;
  // 1/sqrt(k) or 1/sqrt(nnz) rounded once to fp32: the same value on every backend and in the reference
  p.scale = float(1.0 / std::sqrt(double(p.kind == SK_SKETCH_sparse_sign ? a.nnz : a.k)));
  p.terms = sk_u32(a.terms);  // validated: <= 2^20, streams < 2^32
  p.stream0 = sk_u32(a.stream0);
  p.stream_step = sk_u32(a.stream_step);
  return p;
}

int64_t sketch_terms(const SketchMatrixArgs& a) { return std::max<int64_t>(a.terms, 1); }

SketchParams sketch_operator(const SketchArgs& a) {
  const int64_t last = a.x.size(-1);
  SketchMatrixArgs m;
  m.kind = a.kind, m.k = a.transpose ? last : a.k, m.n = a.transpose ? a.n : last, m.seed = a.seed, m.nnz = a.nnz;
  m.r1 = m.k, m.c1 = m.n;
  return sketch_params(m);
}

SparseParams sparse_sketch_params(const SketchArgs& a) {
  const SketchParams s = sketch_operator(a);
  const int64_t last = a.x.size(-1);
  // the entries' magnitude as S holds it in the op's dtype (sketch_matrix rounds the fp32 scale once)
  const float mult = a.x.dtype == DType::f16    ? float(f16(s.scale))
                     : a.x.dtype == DType::bf16 ? float(bf16(s.scale))
                                                : s.scale;
  return sparse_params(s, sk_u32(last == 0 ? 0 : a.x.numel() / last), mult);
}

std::unique_ptr<PreparedCall> sketch_matrix_prepare(const SketchMatrixArgs& a, Backend b) {
  const char* op = "sketch_matrix";
  check_operator(op, a.kind, a.k, a.n, a.seed, a.nnz);
  check_float(op, "dtype", a.x);
  check_backend(op, "device", a.x, b);
  SWISK_CHECK(0 <= a.r0 && a.r0 <= a.r1 && a.r1 <= a.k, value, op, "rows", "need 0 <= r0 <= r1 <= k = ", a.k,
              ", got [", a.r0, ", ", a.r1, ")");
  SWISK_CHECK(0 <= a.c0 && a.c0 <= a.c1 && a.c1 <= a.n, value, op, "cols", "need 0 <= c0 <= c1 <= n = ", a.n,
              ", got [", a.c0, ", ", a.c1, ")");
  SWISK_CHECK(0 <= a.terms && a.terms <= (int64_t(1) << 20), value, op, "terms", "must be in [0, 2^20], got ",
              a.terms);
  SWISK_CHECK(0 <= a.stream0 && a.stream0 < (int64_t(1) << 32), value, op, "stream0", "must be in [0, 2^32), got ",
              a.stream0);
  SWISK_CHECK(0 <= a.stream_step && a.stream_step < (int64_t(1) << 32), value, op, "stream_step",
              "must be in [0, 2^32), got ", a.stream_step);
  const int64_t tile = (a.r1 - a.r0) * (a.c1 - a.c0);  // < 2^62; then times terms <= 2^20 without overflow
  SWISK_CHECK(tile < (int64_t(1) << 40) && tile * sketch_terms(a) < (int64_t(1) << 40), value, op, "cols",
              "a tile (all terms) of at most 2^40 entries is supported");
  auto c = make_call(op, a, b);
  c->outputs = {{sketch_terms(a) * (a.r1 - a.r0), a.c1 - a.c0}};
  c->zero_outputs = {uint8_t(sketch_id(op, a.kind) == SK_SKETCH_sparse_sign)};  // the kernel writes the non-zeros
  return c;
}

std::unique_ptr<PreparedCall> sketch_prepare(const SketchArgs& a, Backend b) {
  const char* op = a.transpose ? "sketch_transpose" : "sketch";
  check_float(op, "x", a.x);
  check_min_ndim(op, "x", a.x, 1, a.transpose ? "(..., k)" : "(..., n)");
  check_backend(op, "x", a.x, b);
  const int64_t k = a.transpose ? a.x.size(-1) : a.k, n = a.transpose ? a.n : a.x.size(-1);
  check_operator(op, a.kind, k, n, a.seed, a.nnz);
  const int64_t rows = a.x.size(-1) == 0 ? 0 : a.x.numel() / a.x.size(-1);
  SWISK_CHECK(rows < (int64_t(1) << 32), value, op, "x", "at most 2^32 rows are supported");
  // Sparse-sign runs swisk's kernels (nnz multiply-adds per column) while its column table (n x nnz
  // entries) stays within 2^23 entries, and: on the CPU (cpu/sketch_sparse.h) its k-side tile (k x 16
  // values) within 16 MiB; on the GPUs (sketch_sparse.h) the forward's workspace within 64 MiB and a row
  // of S within 4096 entries (n nnz / k of them: one thread walks a row). Else, and for every other
  // kind, Python multiplies tiles of S with the vendor's GEMM.
  const bool sparse_kind = sketch_id(op, a.kind) == SK_SKETCH_sparse_sign && n * a.nnz <= (int64_t(1) << 23);
  int64_t words = 0;
  if (sparse_kind && b != Backend::cpu) {  // the same bound for both directions: the forward's workspace
    SketchParams s{};
    s.k = sk_u32(k), s.n = sk_u32(n), s.nnz = sk_u32(a.nnz);
    words = int64_t(sparse_work_words(sparse_params(s, 0, 1.0f), false));
  }
  // On CUDA, from an H200's run (benchmarks/README.md): the kernels applied 2.9e11 (row of x, entry of S)
  // pairs a second in x S^T and 1.0e12 in g S, cuBLAS 48 TFLOP/s in fp32 and 418 in bf16 over tiles of S;
  // so the kernels while k / nnz (the GEMM's multiply-adds per pair) reaches x S^T's 96 (fp32) or 768
  // (fp16, bf16), g S's 32 or 256. (x S^T's rate is that of 3a7a704's product; the walk since, not yet
  // measured, is built to be faster, so the rule errs toward the GEMM.) Metal, never measured, keeps them.
  bool gemm_faster = false;
  if (b == Backend::cuda || b == Backend::cuda_emu) {
    const bool half = a.x.dtype == DType::f16 || a.x.dtype == DType::bf16;
    gemm_faster = k < (a.transpose ? (half ? 256 : 32) : (half ? 768 : 96)) * a.nnz;
  }
  const bool sparse = sparse_kind && !gemm_faster &&
                      (b == Backend::cpu ? k <= (int64_t(1) << 18)
                                         : words <= (int64_t(1) << 24) && n * a.nnz <= 4096 * k);
  if (sparse && a.x.numel() > 0) check_contiguous(op, "x", a.x);
  auto c = sparse ? make_call(op, a, b) : make_plan_call(op, a, b, nullptr);
  if (sparse && b != Backend::cpu && a.x.numel() > 0)
    c->work = int64_t(sparse_work_words(sparse_sketch_params(a), a.transpose));
  std::vector<int64_t> shape(a.x.shape, a.x.shape + a.x.ndim);
  shape.back() = a.transpose ? n : k;
  c->outputs = {shape};
  c->zero_outputs = {0};
  return c;
}

std::vector<FwhtParams> fwht_passes(int64_t rows, int64_t n, double scale, int max_chunk_log2) {
  sk_u32 log2n = 0;
  while ((int64_t(1) << log2n) < n) ++log2n;
  FwhtParams p{};
  p.n = sk_u32(n);
  p.rows = sk_u32(rows);
  p.lo = 0;
  p.bits = log2n < sk_u32(max_chunk_log2) ? log2n : sk_u32(max_chunk_log2);
  std::vector<FwhtParams> passes{p};
  for (p.lo = p.bits; p.lo < log2n; p.lo += p.bits) {
    p.bits = log2n - p.lo < 5 ? log2n - p.lo : 5;
    passes.push_back(p);
  }
  for (FwhtParams& q : passes) q.scale = &q == &passes.back() ? float(scale) : 1.0f;
  return passes;
}

std::unique_ptr<PreparedCall> fwht_prepare(const FwhtArgs& a, Backend b) {
  const char* op = "fwht";
  check_float(op, "x", a.x);
  check_min_ndim(op, "x", a.x, 1, "(..., n)");
  check_backend(op, "x", a.x, b);
  const int64_t n = a.x.size(-1);
  SWISK_CHECK(n >= 1 && n < kMaxDim && (n & (n - 1)) == 0, value, op, "x",
              "the last dimension must be a power of two below 2^31, got ", n);
  SWISK_CHECK(a.x.numel() / n < (int64_t(1) << 32), value, op, "x", "at most 2^32 rows are supported");
  SWISK_CHECK(std::isfinite(a.scale), value, op, "scale", "must be finite, got ", a.scale);
  SWISK_CHECK(a.x.dtype == DType::f64 || std::fabs(a.scale) <= std::numeric_limits<float>::max(), value, op, "scale",
              "must be within float32's range for an x of float32, float16 or bfloat16 (the kernels' arithmetic), got ",
              a.scale);
  if (a.x.numel() > 0) check_contiguous(op, "x", a.x);
  auto c = make_call(op, a, b);
  c->outputs = {std::vector<int64_t>(a.x.shape, a.x.shape + a.x.ndim)};
  c->zero_outputs = {0};
  return c;
}

static int64_t pow2_at_least(int64_t n) {
  int64_t N = 1;
  while (N < n) N <<= 1;
  return N;
}

SrhtParams srht_params(const SrhtArgs& a) {
  SrhtParams p{};
  const int64_t last = a.x.size(-1), n = a.transpose ? a.n : last, k = a.transpose ? last : a.k;
  p.n = sk_u32(n);
  p.k = sk_u32(k);
  p.rows = sk_u32(last == 0 ? 0 : a.x.numel() / last);
  p.big_n = sk_u32(pow2_at_least(n));
  int bits = 0;
  while ((int64_t(1) << bits) < p.big_n) ++bits;
  p.half_bits = sk_u32((bits + 1) / 2);
  p.seed_lo = sk_u32(uint64_t(a.seed) & 0xffffffffu);
  p.seed_hi = sk_u32(uint64_t(a.seed) >> 32);
  p.transpose = a.transpose ? 1u : 0u;
  p.scale = float(1.0 / std::sqrt(double(k)));
  const int64_t cap = a.work_rows > 0 ? a.work_rows : std::max<int64_t>(1, SWISK_SRHT_WORK_FLOATS / p.big_n);
  p.row0 = 0;
  p.cap = sk_u32(std::min<int64_t>(p.rows, cap));
  return p;
}

std::unique_ptr<PreparedCall> srht_prepare(const SrhtArgs& a, Backend b) {
  const char* op = a.transpose ? "srht_transpose" : "srht";
  check_float(op, "x", a.x);
  check_min_ndim(op, "x", a.x, 1, a.transpose ? "(..., k)" : "(..., n)");
  check_backend(op, "x", a.x, b);
  const int64_t last = a.x.size(-1), n = a.transpose ? a.n : last, k = a.transpose ? last : a.k;
  SWISK_CHECK(n >= 1 && n < kMaxDim, value, op, "n", "must be in [1, 2^31), got ", n);
  SWISK_CHECK(k >= 1 && k <= n, value, op, "k", "must be in [1, n] = [1, ", n, "], got ", k);
  SWISK_CHECK(a.seed >= 0, value, op, "seed", "must be a non-negative int below 2^63, got ", a.seed);
  const int64_t rows = a.x.numel() / last;
  SWISK_CHECK(rows < (int64_t(1) << 32), value, op, "x", "at most 2^32 rows are supported");
  if (a.x.numel() > 0) check_contiguous(op, "x", a.x);
  auto c = make_call(op, a, b);
  std::vector<int64_t> shape(a.x.shape, a.x.shape + a.x.ndim);
  shape.back() = a.transpose ? n : k;
  c->outputs = {shape};
  c->zero_outputs = {0};
  // GPUs: a pass's rows, then the tables (hadamard.h); the CPU goes row by row in buffers of its own
  const int64_t cap = srht_params(a).cap;
  c->work = b == Backend::cpu ? 0 : cap * pow2_at_least(n) + n + (a.transpose ? pow2_at_least(n) : k);
  return c;
}

void fwht(const FwhtArgs& a) {
  auto c = fwht_prepare(a, a.launch.backend);
  run_prepared(*c, "fwht", {&a.x, &a.out});
}

void sketch_matrix(const SketchMatrixArgs& a) {
  auto c = sketch_matrix_prepare(a, a.launch.backend);
  run_prepared(*c, "sketch_matrix", {&a.x, &a.out});
}

}  // namespace swisk
