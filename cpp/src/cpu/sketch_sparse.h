// Sparse-sign sketches on the CPU without forming S: x S^T and g S cost nnz multiply-adds per input
// column instead of a dense GEMM's k. A table holds every column's rows and values (the header's
// sampling, so the same S as sketch_matrix; the last few tables kept for the next calls), then blocks
// of L rows (one per vector lane) go through column-major tiles: x S^T adds val * x[:, j] into the tile
// rows of column j's entries (a vector of L rows per add), g S gathers them. Each row's sums run in the
// same order whatever the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "parallel.h"
#include "swisk/ops/sketch.h"
#include "vec_math.h"

namespace swisk::cpu {

// Columns per tile of the input side; the k side stays whole (k * L values per thread).
constexpr int64_t kSparseCols = 4096;

struct SparseColumns {
  std::vector<sk_u32> row;  // row[j * nnz + m]: step m's row of column j
  std::vector<float> val;   // its value, +-1/sqrt(nnz)
};

// The words (x, y) of step m's draws for columns j0 .. j0 + nj, in a vectorised integer loop.
SK_CLONES inline void sparse_draws(const SketchParams& p, int64_t j0, int64_t nj, sk_u32 m, sk_u32* __restrict rx,
                                   sk_u32* __restrict ry) {
  for (int64_t j = 0; j < nj; ++j) {
    const SkU4 r = sk_sketch_draw(p, sk_u32(j0 + j), m);
    rx[j] = r.x, ry[j] = r.y;
  }
}

inline SparseColumns sparse_columns(const SketchParams& p) {
  SparseColumns t{std::vector<sk_u32>(size_t(p.n) * p.nnz), std::vector<float>(size_t(p.n) * p.nnz)};
  constexpr int64_t kBlock = 256;
  parallel_for((int64_t(p.n) + kBlock - 1) / kBlock, 1, [&](int64_t lo, int64_t hi) {
    std::vector<sk_u32> rx(size_t(kBlock) * p.nnz), ry(size_t(kBlock) * p.nnz);
    sk_u32 taken[SWISK_SKETCH_MAX_NNZ];
    for (int64_t b = lo; b < hi; ++b) {
      const int64_t j0 = b * kBlock, nj = std::min<int64_t>(kBlock, int64_t(p.n) - j0);
      for (sk_u32 m = 0; m < p.nnz; ++m) sparse_draws(p, j0, nj, m, rx.data() + m * kBlock, ry.data() + m * kBlock);
      for (int64_t j = 0; j < nj; ++j)
        for (sk_u32 m = 0; m < p.nnz; ++m) {
          SkU4 r;
          r.x = rx[m * kBlock + j], r.y = ry[m * kBlock + j], r.z = r.w = 0;  // the pick reads x and y
          t.val[(j0 + j) * p.nnz + m] = sketch_sparse_pick(p, m, r, taken, 1);
          t.row[(j0 + j) * p.nnz + m] = taken[m];
        }
    }
  });
  return t;
}

// The tables of the operators applied last, at most kTableCacheBytes in all: a layer or a solver applies
// one operator call after call, and its backward the same operator's transpose, so only the first call
// pays for the table. Keyed by everything a table is a pure function of: (seed, k, n, nnz).
constexpr size_t kTableCacheBytes = size_t(32) << 20;

inline std::shared_ptr<const SparseColumns> cached_columns(const SketchParams& p) {
  struct Entry {
    sk_u32 seed_lo, seed_hi, k, n, nnz;
    std::shared_ptr<const SparseColumns> table;
  };
  static std::mutex mu;
  static std::list<Entry> recent;  // most recent first
  const auto same = [&](const Entry& e) {
    return e.seed_lo == p.seed_lo && e.seed_hi == p.seed_hi && e.k == p.k && e.n == p.n && e.nnz == p.nnz;
  };
  const auto bytes = [](const Entry& e) { return size_t(e.n) * e.nnz * (sizeof(sk_u32) + sizeof(float)); };
  {
    const std::lock_guard<std::mutex> lock(mu);
    for (auto it = recent.begin(); it != recent.end(); ++it)
      if (same(*it)) {
        recent.splice(recent.begin(), recent, it);
        return recent.front().table;
      }
  }
  auto table = std::make_shared<const SparseColumns>(sparse_columns(p));  // outside the lock
  Entry e{p.seed_lo, p.seed_hi, p.k, p.n, p.nnz, table};
  if (bytes(e) <= kTableCacheBytes) {
    const std::lock_guard<std::mutex> lock(mu);
    recent.push_front(std::move(e));
    size_t total = 0;
    for (auto it = recent.begin(); it != recent.end();) {
      total += bytes(*it);
      it = total > kTableCacheBytes ? recent.erase(it) : std::next(it);
    }
  }
  return table;
}

// Row-major rows (leading dimension ld, nr <= L of them, nc columns) to and from a column-major tile of L
// lanes (lanes past nr zero), 16 columns of one row at a time: each row's cache line is used whole at
// once, whatever ld (a power-of-two ld puts every row in the same L1 set).
template <typename T, typename A>
inline void tile_in(const T* src, int64_t ld, int64_t nr, int64_t nc, A* __restrict dst) {
  constexpr int64_t L = kLanes<A>;
  for (int64_t j0 = 0; j0 < nc; j0 += 16) {
    const int64_t nj = std::min<int64_t>(16, nc - j0);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t j = j0; j < j0 + nj; ++j) dst[j * L + l] = l < nr ? A(src[l * ld + j]) : A(0);
  }
}
template <typename T, typename A>
inline void tile_out(const A* __restrict src, int64_t nr, int64_t nc, T* dst, int64_t ld) {
  constexpr int64_t L = kLanes<A>;
  for (int64_t j0 = 0; j0 < nc; j0 += 16) {
    const int64_t nj = std::min<int64_t>(16, nc - j0);
    for (int64_t l = 0; l < nr; ++l)
      for (int64_t j = j0; j < j0 + nj; ++j) dst[l * ld + j] = T(src[j * L + l]);
  }
}

// Copies of the k-side tile that x S^T adds into, column j into copy j mod copies, summed at the end: with
// a small k, consecutive adds to one row would otherwise wait on each other's stores.
template <typename A>
constexpr int64_t sparse_copies(int64_t k) { return k * kLanes<A> * int64_t(sizeof(A)) <= 8192 ? 4 : 1; }

// Rows r0 .. r0 + nr (nr <= L) of x (rows, n) -> y (rows, k) = x S^T; yt (copies * k * L) and xt
// (kSparseCols * L) are the thread's tiles.
template <typename T, typename A>
SK_CLONES_FLAT void sparse_sketch_rows(const SketchParams& p, const SparseColumns& t, const T* x, T* y, int64_t r0,
                                       int64_t nr, A* yt, A* xt) {
  constexpr int64_t L = kLanes<A>;
  const int64_t n = p.n, k = p.k, nnz = p.nnz, copies = sparse_copies<A>(k);
  std::fill(yt, yt + copies * k * L, A(0));
  for (int64_t c0 = 0; c0 < n; c0 += kSparseCols) {
    const int64_t nc = std::min(kSparseCols, n - c0);
    tile_in(x + r0 * n + c0, n, nr, nc, xt);
    for (int64_t j = 0; j < nc; ++j) {
      const VW<A> v = vload(xt + j * L);
      const sk_u32* row = t.row.data() + (c0 + j) * nnz;
      const float* val = t.val.data() + (c0 + j) * nnz;
      A* acc = yt + ((c0 + j) % copies) * k * L;
      for (int64_t m = 0; m < nnz; ++m) {
        A* d = acc + int64_t(row[m]) * L;
        vstore(d, vload(d) + v * A(val[m]));
      }
    }
  }
  for (int64_t c = 1; c < copies; ++c)
    for (int64_t i = 0; i < k * L; i += L) vstore(yt + i, vload(yt + i) + vload(yt + c * k * L + i));
  tile_out(yt, nr, k, y + r0 * k, k);
}

// Rows r0 .. r0 + nr of g (rows, k) -> out (rows, n) = g S; gt (k * L) and ot (kSparseCols * L).
template <typename T, typename A>
SK_CLONES_FLAT void sparse_transpose_rows(const SketchParams& p, const SparseColumns& t, const T* g, T* out,
                                          int64_t r0, int64_t nr, A* gt, A* ot) {
  constexpr int64_t L = kLanes<A>;
  const int64_t n = p.n, k = p.k, nnz = p.nnz;
  tile_in(g + r0 * k, k, nr, k, gt);
  for (int64_t c0 = 0; c0 < n; c0 += kSparseCols) {
    const int64_t nc = std::min(kSparseCols, n - c0);
    for (int64_t j = 0; j < nc; ++j) {
      const sk_u32* row = t.row.data() + (c0 + j) * nnz;
      const float* val = t.val.data() + (c0 + j) * nnz;
      VW<A> acc = vload(gt + int64_t(row[0]) * L) * A(val[0]);
      for (int64_t m = 1; m < nnz; ++m) acc += vload(gt + int64_t(row[m]) * L) * A(val[m]);
      vstore(ot + j * L, acc);
    }
    tile_out(ot, nr, nc, out + r0 * n + c0, n);
  }
}

// The op: x (rows, n) -> (rows, k), or with transpose g (rows, k) -> (rows, n); blocks of L rows in parallel.
inline void sparse_sketch(const SketchArgs& a) {
  const int64_t last = a.x.size(-1), rows = last == 0 ? 0 : a.x.numel() / last;
  if (rows == 0) return;
  const SketchParams p = sketch_operator(a);
  const std::shared_ptr<const SparseColumns> table = cached_columns(p);
  const SparseColumns& t = *table;
  dispatch_float<true>(a.x.dtype, a.transpose ? "sketch_transpose" : "sketch", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    constexpr int64_t L = kLanes<A>;
    const T* x = a.x.ptr<const T>();
    T* out = a.out.ptr<T>();
    parallel_for((rows + L - 1) / L, 1, [&](int64_t lo, int64_t hi) {
      std::vector<A> side(size_t(sparse_copies<A>(p.k) * p.k) * L), cols(size_t(std::min<int64_t>(kSparseCols, p.n)) * L);
      for (int64_t b = lo; b < hi; ++b) {
        const int64_t r0 = b * L, nr = std::min(L, rows - r0);
        if (a.transpose) {
          sparse_transpose_rows<T, A>(p, t, x, out, r0, nr, side.data(), cols.data());
        } else {
          sparse_sketch_rows<T, A>(p, t, x, out, r0, nr, side.data(), cols.data());
        }
      }
    });
  });
}

}  // namespace swisk::cpu
