// CPU sketch generation: the kernel header's entry functions over rows (dense kinds) or columns
// (sparse-sign). Every value is a pure function of (seed, row, column), so the result does not depend
// on the thread count. fp64 tiles hold the fp32 values widened exactly (the same operator in every dtype).
// Dense rows go in blocks of columns: Philox's words in a vectorised integer loop (an AVX2 clone),
// then the entries from them with the header's fp32 math.
#include "swisk/ops/sketch.h"

#include <algorithm>
#include <vector>

#include "dtype_dispatch.h"
#include "clones.h"
#include "parallel.h"

namespace swisk::cpu {

constexpr sk_u32 kBlock = 256;

// The first two words of the draws of columns c .. c + nb of `row` (integer math only).
SK_CLONES static void draw_block(const SketchParams& p, sk_u32 row, sk_u32 c, sk_u32 nb, sk_u32* w0, sk_u32* w1) {
  for (sk_u32 j = 0; j < nb; ++j) {
    const SkU4 r = sk_sketch_draw(p, c + j, row);
    w0[j] = r.x;
    w1[j] = r.y;
  }
}

template <int K, typename T>
static void dense_rows(const SketchParams& p, int64_t lo, int64_t hi, T* out) {
  sk_u32 w0[kBlock], w1[kBlock];
  for (int64_t r = lo; r < hi; ++r) {
    T* dst = out + r * int64_t(p.cols);
    for (sk_u32 c = 0; c < p.cols; c += kBlock) {
      const sk_u32 nb = std::min(kBlock, p.cols - c);
      draw_block(p, p.r0 + sk_u32(r), p.c0 + c, nb, w0, w1);
      for (sk_u32 j = 0; j < nb; ++j) dst[c + j] = T(sketch_dense_value<K>(p, w0[j], w1[j]));
    }
  }
}

static void generate(const SketchMatrixArgs& a) {
  const SketchParams p = sketch_params(a);
  if (p.rows == 0 || p.cols == 0) return;
  dispatch_float<true>(a.x.dtype, "sketch_matrix", [&](auto tag) {
    using T = decltype(tag);
    T* out = a.out.ptr<T>();
    dispatch_sketch(p.kind, [&](auto kind) {
      constexpr int K = decltype(kind)::value;
      if constexpr (K == SK_SKETCH_sparse_sign) {
        parallel_for(p.cols, 256, [&](int64_t lo, int64_t hi) {
          sk_u32 taken[SWISK_SKETCH_MAX_NNZ];
          for (int64_t c = lo; c < hi; ++c) sketch_sparse_column<T>(p, p.c0 + sk_u32(c), out, taken, 1);
        });
      } else {
        const int64_t grain = p.cols >= 4096 ? 1 : (4096 + p.cols - 1) / p.cols;
        parallel_for(p.rows, grain, [&](int64_t lo, int64_t hi) { dense_rows<K, T>(p, lo, hi, out); });
      }
    });
  });
}

// In-place unnormalised FWHT of one row, n a power of two: strides 1, 2, 4 as 8-point blocks, then two
// strides per pass over contiguous runs (vectorised). Each value takes the same additions in the same
// order as the plain radix-2 stages, so the result is bitwise theirs.
template <typename A>
SK_CLONES static void fwht_row(A* __restrict b, int64_t n) {
  int64_t h = 1;
  if (n >= 8) {
    for (int64_t i = 0; i < n; i += 8) {
      A* p = b + i;
      const A a0 = p[0] + p[1], a1 = p[0] - p[1], a2 = p[2] + p[3], a3 = p[2] - p[3];
      const A a4 = p[4] + p[5], a5 = p[4] - p[5], a6 = p[6] + p[7], a7 = p[6] - p[7];
      const A c0 = a0 + a2, c1 = a1 + a3, c2 = a0 - a2, c3 = a1 - a3;
      const A c4 = a4 + a6, c5 = a5 + a7, c6 = a4 - a6, c7 = a5 - a7;
      p[0] = c0 + c4, p[1] = c1 + c5, p[2] = c2 + c6, p[3] = c3 + c7;
      p[4] = c0 - c4, p[5] = c1 - c5, p[6] = c2 - c6, p[7] = c3 - c7;
    }
    h = 8;
  }
  for (; 4 * h <= n; h *= 4)
    for (int64_t i0 = 0; i0 < n; i0 += 4 * h)
      for (int64_t i = i0; i < i0 + h; ++i) {
        const A a0 = b[i], a1 = b[i + h], a2 = b[i + 2 * h], a3 = b[i + 3 * h];
        const A s0 = a0 + a1, d0 = a0 - a1, s1 = a2 + a3, d1 = a2 - a3;
        b[i] = s0 + s1, b[i + h] = d0 + d1, b[i + 2 * h] = s0 - s1, b[i + 3 * h] = d0 - d1;
      }
  for (; h < n; h *= 2)
    for (int64_t i0 = 0; i0 < n; i0 += 2 * h)
      for (int64_t i = i0; i < i0 + h; ++i) {
        const A u = b[i], v = b[i + h];
        b[i] = u + v, b[i + h] = u - v;
      }
}

// FWHT of (rows, n): each row in the accumulator type A, butterflies, then the scale (x may be out).
template <typename T, typename A>
static void fwht_rows(const T* x, T* out, int64_t rows, int64_t n, A scale) {
  parallel_for(rows, std::max<int64_t>(1, 4096 / n), [&](int64_t lo, int64_t hi) {
    std::vector<A> buf(n);
    for (int64_t r = lo; r < hi; ++r) {
      for (int64_t i = 0; i < n; ++i) buf[i] = A(float_of(x[r * n + i]));
      fwht_row(buf.data(), n);
      for (int64_t i = 0; i < n; ++i) out[r * n + i] = T(buf[i] * scale);
    }
  });
}

static void fwht(const FwhtArgs& a) {
  const int64_t n = a.x.size(-1), rows = n ? a.x.numel() / n : 0;
  dispatch_float<true>(a.x.dtype, "fwht", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    fwht_rows<T, A>(a.x.ptr<const T>(), a.out.ptr<T>(), rows, n, A(a.scale));
  });
}

// SRHT (either direction): the in pass into the workspace (type A), its FWHT in place, the out pass. The
// signs and the row permutation depend on the column alone: computed once per call as tables (the GPU
// passes recompute them per element), with the passes' arithmetic of the kernel header.
static void srht(const SrhtArgs& a) {
  const SrhtParams p = srht_params(a);
  if (p.rows == 0) return;
  dispatch_float<true>(a.x.dtype, "srht", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const T* x = a.x.ptr<const T>();
    A* work = a.work.ptr<A>();
    T* out = a.out.ptr<T>();
    const int64_t rows = p.rows, big = p.big_n, n = p.n, k = p.k;
    std::vector<A> sign(n);
    std::vector<sk_u32> perm(a.transpose ? big : k);  // transpose: the inverse permutation
    parallel_for(n, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) sign[j] = A(sk_srht_sign(p, sk_u32(j)));
    });
    parallel_for(int64_t(perm.size()), 1024, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) perm[i] = sk_srht_perm(p, sk_u32(i), a.transpose);
    });
    parallel_for(rows, std::max<int64_t>(1, 4096 / big), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        A* w = work + r * big;
        if (a.transpose) {
          for (int64_t j = 0; j < big; ++j) w[j] = perm[j] < k ? A(x[r * k + perm[j]]) : A(0);
        } else {
          for (int64_t j = 0; j < big; ++j) w[j] = j < n ? sign[j] * A(x[r * n + j]) : A(0);
        }
      }
    });
    fwht_rows<A, A>(work, work, p.rows, p.big_n, A(1));
    const A scale = A(p.scale);
    parallel_for(rows, std::max<int64_t>(1, 4096 / big), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const A* w = work + r * big;
        if (a.transpose) {
          for (int64_t j = 0; j < n; ++j) out[r * n + j] = T(sign[j] * w[j] * scale);
        } else {
          for (int64_t i = 0; i < k; ++i) out[r * k + i] = T(w[perm[i]] * scale);
        }
      }
    });
  });
}

void register_sketch(Registry& r) {
  r.add<SketchMatrixArgs>("sketch_matrix", Backend::cpu, &generate);
  r.add<FwhtArgs>("fwht", Backend::cpu, &fwht);
  r.add<SrhtArgs>("srht", Backend::cpu, &srht);
  r.add<SrhtArgs>("srht_transpose", Backend::cpu, &srht);
}

}  // namespace swisk::cpu
