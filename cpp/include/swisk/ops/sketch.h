// Sketch operators: the public C++ entry points (prepare once, then launch).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "swisk/kernels/hadamard.h"
#include "swisk/kernels/sketch_sparse.h"
#include "swisk/call.h"

namespace swisk {

// A tile of the k x n operator: rows r0 .. r1, columns c0 .. c1, as out (r1 - r0, c1 - c0).
// x gives the tile's dtype and device (its data is not read). terms >= 1: a stack of that many operators'
// tiles, out (terms·(r1 - r0), c1 - c0), term t's of seed sketch_term_seed(seed, stream0 + t·stream_step)
// (a layer's seeded operators in one call); terms = 0: the operator of seed itself.
struct SketchMatrixArgs {
  TensorView x, out;
  std::string kind;
  int64_t k = 0, n = 0, seed = 0, r0 = 0, r1 = 0, c0 = 0, c1 = 0, nnz = 8;
  int64_t terms = 0, stream0 = 0, stream_step = 0;
  Launch launch;
  static constexpr int kInputs = 1;
  static constexpr bool kWork = false;
  using A = SketchMatrixArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::out};
};

// x (..., n) -> out (..., k) = x S^T (transpose = false), or x (..., k) -> out (..., n) = x S
// (transpose = true, n given). Validated here; sparse-sign runs swisk's kernels (work: the GPUs' tables,
// sketch_sparse.h), the other kinds Python's tiles of S (from sketch_matrix) and torch's GEMM.
struct SketchArgs {
  TensorView x, out, work;
  std::string kind;
  int64_t k = 0, n = 0, seed = 0, nnz = 8;
  bool transpose = false;
  Launch launch;
  static constexpr int kInputs = 1;
  static constexpr bool kWork = true;
  using A = SketchArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::out, &A::work};
};

// x (..., n) -> out = scale * H_n x along the last dimension, n a power of two.
struct FwhtArgs {
  TensorView x, out;
  double scale = 1;
  Launch launch;
  static constexpr int kInputs = 1;
  static constexpr bool kWork = false;
  using A = FwhtArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::out};
};

// SRHT: x (..., n) -> out (..., k) (transpose = false), or x (..., k) -> out (..., n) (transpose = true, n
// given); on the GPUs work holds a pass's padded rows (at most 2^24 floats' worth, or work_rows rows
// when given) and the tables.
struct SrhtArgs {
  TensorView x, out, work;
  int64_t k = 0, n = 0, seed = 0;
  bool transpose = false;
  int64_t work_rows = 0;  // GPUs: rows per pass (0: as many as SWISK_SRHT_WORK_FLOATS hold)
  Launch launch;
  static constexpr int kInputs = 1;
  static constexpr bool kWork = true;
  using A = SrhtArgs;
  static constexpr TensorView A::* kTensors[] = {&A::x, &A::out, &A::work};
};

// "gaussian, rademacher, sparse_sign" (id order, from SWISK_SKETCHES).
const char* sketch_names();
const char* sketch_name(int id);
// The id of a kind name; an unknown name raises ValueError listing the valid ones.
int sketch_id(const char* op, const std::string& name);

std::unique_ptr<PreparedCall> sketch_matrix_prepare(const SketchMatrixArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> sketch_prepare(const SketchArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> fwht_prepare(const FwhtArgs& inputs, Backend b);
std::unique_ptr<PreparedCall> srht_prepare(const SrhtArgs& inputs, Backend b);

// For C++ callers holding their own output: prepare on args.launch.backend, check it, run.
void sketch_matrix(const SketchMatrixArgs& args);
void fwht(const FwhtArgs& args);

// The kernel parameters of a validated tile request (all its terms: sketch_term_key gives each one's key).
SketchParams sketch_params(const SketchMatrixArgs& a);
// Operators (tiles) a request writes: max(terms, 1).
int64_t sketch_terms(const SketchMatrixArgs& a);
// The whole operator a validated sketch call applies (k x n), and its GPU chunking (sketch_sparse.h).
SketchParams sketch_operator(const SketchArgs& a);
SparseParams sparse_sketch_params(const SketchArgs& a);
// The GPU passes of a validated transform: the chunk pass (distances up to 2^(max_chunk_log2 - 1)),
// then one register pass per 5 further distances; the scale sits in the last.
std::vector<FwhtParams> fwht_passes(int64_t rows, int64_t n, double scale, int max_chunk_log2);
SrhtParams srht_params(const SrhtArgs& a);

// Calls f(std::integral_constant<int, K>{}) for the kind id K (kernels take it as a template).
template <class F>
void dispatch_sketch(sk_u32 id, F&& f) {
#define SK_SKETCH_CASE(k, name)          \
  case k:                                \
    f(std::integral_constant<int, k>{}); \
    return;
  switch (id) { SWISK_SKETCHES(SK_SKETCH_CASE) }
#undef SK_SKETCH_CASE
  fail(ErrorKind::value, "sketch_matrix", "kind", "unknown sketch id ", id);
}

}  // namespace swisk
