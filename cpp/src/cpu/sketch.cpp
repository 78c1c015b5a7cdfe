// CPU sketch generation: the kernel header's entry functions over rows (dense kinds) or columns
// (sparse-sign). Every value is a pure function of (seed, row, column), so the result does not depend
// on the thread count. fp64 tiles hold the fp32 values widened exactly (the same operator in every dtype).
// Gaussian rows go in blocks of columns: Philox's words in a vectorised integer loop (an AVX2 clone),
// then the entries from them with the header's fp32 math, one radius per pair of columns; Rademacher
// rows take 128 signs per draw.
#include "swisk/ops/sketch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "dtype_dispatch.h"
#include "clones.h"
#include "parallel.h"
#include "sketch_sparse.h"
#include "vec_math.h"

namespace swisk::cpu {

constexpr sk_u32 kBlock = 256;

// The words of the column pairs that columns c .. c + nb of `row` fall in (integer math only): one
// draw per four columns (the header's rule) in a vectorised loop, then pair q (columns 2P and 2P + 1,
// P = c / 2 + q) takes words x, y or z, w of draw P / 2. Both columns of a pair share the words.
SK_CLONES static void draw_pairs(const SketchParams& p, sk_u32 row, sk_u32 c, sk_u32 nb, sk_u32* __restrict w0,
                                 sk_u32* __restrict w1) {
  constexpr sk_u32 kDraws = kBlock / 4 + 1;
  sk_u32 d[4 * kDraws];  // word q of draw g at q * kDraws + g
  const sk_u32 g0 = c >> 2, nd = ((c + nb + 3) >> 2) - g0;
  for (sk_u32 g = 0; g < nd; ++g) {
    const SkU4 r = sk_sketch_draw(p, g0 + g, row);
    d[g] = r.x, d[kDraws + g] = r.y, d[2 * kDraws + g] = r.z, d[3 * kDraws + g] = r.w;
  }
  const sk_u32 p0 = c >> 1, np = ((c + nb + 1) >> 1) - p0;
  for (sk_u32 q = 0; q < np; ++q) {
    const sk_u32 pair = p0 + q, at = (pair & 1u) * 2 * kDraws + (pair >> 1) - g0;
    w0[q] = d[at];
    w1[q] = d[at + kDraws];
  }
}

// The Gaussian entries of np column pairs into v[2q], v[2q + 1]: one radius per pair, then the even
// column's cosine and the odd one's (the sine), with the header's functions; branch-free fp32 math in
// unit-stride loops (one loop storing the pairs interleaved was not vectorised: 3.4x slower).
SK_CLONES_FLAT static void gaussian_pairs(const SketchParams& p, const sk_u32* w0, const sk_u32* w1, sk_u32 np,
                                          float* v) {
  constexpr sk_u32 kPairs = kBlock / 2 + 1;
  float even[kPairs], odd[kPairs];
  for (sk_u32 q = 0; q < np; ++q) {
    const float r = sketch_gaussian_radius(w0[q]);
    even[q] = sketch_gaussian_of(p, r, w1[q], false);
    odd[q] = sketch_gaussian_of(p, r, w1[q], true);
  }
  for (sk_u32 q = 0; q < np; ++q) v[2 * q] = even[q], v[2 * q + 1] = odd[q];
}

// Rademacher entries of columns c0 .. c0 + nb (nb <= kBlock) of `row`: one draw per group of 128
// columns (the header's rule), then each word's 32 signs in a vectorised loop.
SK_CLONES_FLAT static void rademacher_block(const SketchParams& p, sk_u32 row, sk_u32 c0, sk_u32 nb, float* v) {
  constexpr sk_u32 kGroups = kBlock / 128 + 1;
  sk_u32 bits[4 * kGroups];
  const sk_u32 g0 = c0 >> 7, off = c0 & 127u, words = (off + nb + 31) >> 5;
  for (sk_u32 g = 0; g < (words + 3) / 4; ++g) {
    const SkU4 d = sk_sketch_draw(p, g0 + g, row);
    bits[4 * g] = d.x, bits[4 * g + 1] = d.y, bits[4 * g + 2] = d.z, bits[4 * g + 3] = d.w;
  }
  const float s = p.scale;
  for (sk_u32 m = off >> 5; m < words; ++m) {  // entry e - off of the block is bit e mod 32 of word e / 32
    const sk_u32 w = bits[m], b0 = m * 32 < off ? off - m * 32 : 0, b1 = std::min<sk_u32>(32, off + nb - m * 32);
    float* dst = v + (m * 32 + b0 - off);
    for (sk_u32 b = 0; b < b1 - b0; ++b) dst[b] = ((w >> (b + b0)) & 1u) ? -s : s;
  }
}

// Rows [lo, hi) of a dense kind's tile, in blocks of kBlock columns.
template <int K, typename T>
static void dense_rows(const SketchParams& p, int64_t lo, int64_t hi, T* out) {
  sk_u32 w0[kBlock / 2 + 1], w1[kBlock / 2 + 1];
  float v[kBlock + 2];
  for (int64_t r = lo; r < hi; ++r) {
    T* dst = out + r * int64_t(p.cols);
    for (sk_u32 c = 0; c < p.cols; c += kBlock) {
      const sk_u32 nb = std::min(kBlock, p.cols - c), row = p.r0 + sk_u32(r), c1 = p.c0 + c;
      sk_u32 first = 0;  // v's entry of column c1 (1: c1 is odd, the second of its pair)
      if constexpr (K == SK_SKETCH_rademacher) {
        rademacher_block(p, row, c1, nb, v);
      } else {
        draw_pairs(p, row, c1, nb, w0, w1);
        gaussian_pairs(p, w0, w1, ((c1 + nb + 1) >> 1) - (c1 >> 1), v);
        first = c1 & 1u;
      }
      for (sk_u32 j = 0; j < nb; ++j) dst[c + j] = T(v[first + j]);
    }
  }
}

// Term t of the request: one operator, its seed the term's key (host memory: the copy is free to take it).
static void generate_term(const SketchMatrixArgs& a, sk_u32 t) {
  SketchParams p = sketch_params(a);
  const SkKey key = sketch_term_key(p, t);
  p.seed_lo = key.lo, p.seed_hi = key.hi, p.terms = 0;
  if (p.rows == 0 || p.cols == 0) return;
  dispatch_float<true>(a.x.dtype, "sketch_matrix", [&](auto tag) {
    using T = decltype(tag);
    T* out = a.out.ptr<T>() + sk_u64(t) * p.rows * p.cols;
    dispatch_sketch(p.kind, [&](auto kind) {
      constexpr int K = decltype(kind)::value;
      if constexpr (K == SK_SKETCH_sparse_sign) {
        parallel_for(p.cols, 256, [&](int64_t lo, int64_t hi) {
          sk_u32 taken[SWISK_SKETCH_MAX_NNZ];
          for (int64_t c = lo; c < hi; ++c) sketch_sparse_column<T>(p, key, p.c0 + sk_u32(c), out, taken, 1);
        });
      } else {
        const int64_t grain = p.cols >= 4096 ? 1 : (4096 + p.cols - 1) / p.cols;
        parallel_for(p.rows, grain, [&](int64_t lo, int64_t hi) { dense_rows<K, T>(p, lo, hi, out); });
      }
    });
  });
}

static void generate(const SketchMatrixArgs& a) {
  for (sk_u32 t = 0; t < sk_u32(sketch_terms(a)); ++t) generate_term(a, t);
}

// FWHT rows on 32-byte vectors (vec_math.h). Every value takes the same additions in the same order as
// the plain radix-2 stages (a, b) -> (a + b, a - b), and the scale multiplies the last stage's sums: the
// result is bitwise swisk.reference.sketch.fwht's.
// One stage at distance H < lanes inside a vector: lane i pairs with lane i ^ H.
template <int H, typename A, int... I>
static inline VW<A> lane_stage(VW<A> v, std::integer_sequence<int, I...>) {
  constexpr int L = sizeof...(I);
  const VW<A> s = vshuffle2<A, (I ^ H)...>(v, v);
  const VW<A> sum = v + s, dif = s - v;  // lower lane: b[i] + b[i + H]; upper lane: b[i - H] - b[i]
  return vshuffle2<A, ((I & H) ? I + L : I)...>(sum, dif);
}

template <typename A>
static inline VW<A> in_vector_stages(VW<A> v) {
  constexpr auto I = std::make_integer_sequence<int, int(kLanes<A>)>();
  v = lane_stage<1, A>(v, I), v = lane_stage<2, A>(v, I);
  if constexpr (kLanes<A> > 4) v = lane_stage<4, A>(v, I);
  if constexpr (kLanes<A> > 8) v = lane_stage<8, A>(v, I);
  return v;
}

// Stages at distances h0, 2·h0, ... below h1 (h0 ≥ lanes) over b[0, n): two per pass; the scale goes
// with the stage at n / 2 when `last`.
template <typename A>
static void vector_stages(A* __restrict b, int64_t n, int64_t h0, int64_t h1, bool last, A scale) {
  using V = VW<A>;
  constexpr int64_t L = kLanes<A>;
  int64_t h = h0;
  for (; 4 * h <= h1; h *= 4) {
    const bool sc = last && 4 * h == n;
    for (int64_t i0 = 0; i0 < n; i0 += 4 * h)
      for (int64_t i = i0; i < i0 + h; i += L) {
        const V a0 = vload(b + i), a1 = vload(b + i + h), a2 = vload(b + i + 2 * h), a3 = vload(b + i + 3 * h);
        const V s0 = a0 + a1, d0 = a0 - a1, s1 = a2 + a3, d1 = a2 - a3;
        V o0 = s0 + s1, o1 = d0 + d1, o2 = s0 - s1, o3 = d0 - d1;
        if (sc) o0 *= scale, o1 *= scale, o2 *= scale, o3 *= scale;
        vstore(b + i, o0), vstore(b + i + h, o1), vstore(b + i + 2 * h, o2), vstore(b + i + 3 * h, o3);
      }
  }
  if (h < h1) {
    const bool sc = last && 2 * h == n;
    for (int64_t i0 = 0; i0 < n; i0 += 2 * h)
      for (int64_t i = i0; i < i0 + h; i += L) {
        const V u = vload(b + i), v = vload(b + i + h);
        V s = u + v, d = u - v;
        if (sc) s *= scale, d *= scale;
        vstore(b + i, s), vstore(b + i + h, d);
      }
  }
}

// dst = scale · H src for one row of n ≥ lanes (src may be dst): chunks of kChunk values first take every
// stage inside them while they sit in L1 (the in-vector stages on the way in from src), then the row
// takes the stages across chunks.
template <typename A>
SK_CLONES_FLAT static void fwht_row(const A* src, A* dst, int64_t n, A scale) {
  constexpr int64_t L = kLanes<A>, kChunk = 8192 / int64_t(sizeof(A));
  const int64_t chunk = std::min(n, kChunk);
  for (int64_t c = 0; c < n; c += chunk) {
    for (int64_t i = c; i < c + chunk; i += L) {
      VW<A> v = in_vector_stages<A>(vload(src + i));
      if (n == L) v *= scale;
      vstore(dst + i, v);
    }
    if (chunk > L) vector_stages(dst + c, chunk, L, chunk, chunk == n, scale);
  }
  if (chunk < n) vector_stages(dst, n, chunk, n, true, scale);
}

// Rows shorter than a vector: the radix-2 stages one value at a time.
template <typename A>
static void fwht_short_row(A* b, int64_t n, A scale) {
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i0 = 0; i0 < n; i0 += 2 * h)
      for (int64_t i = i0; i < i0 + h; ++i) {
        const A u = b[i], v = b[i + h];
        b[i] = u + v, b[i + h] = u - v;
      }
  for (int64_t i = 0; i < n; ++i) b[i] *= scale;
}

// FWHT of (rows, n) into out (x may be out). fp32/fp64 rows go straight from x to out; fp16/bf16 rows
// through an accumulator-type buffer.
template <typename T, typename A>
static void fwht_rows(const T* x, T* out, int64_t rows, int64_t n, A scale) {
  parallel_for(rows, std::max<int64_t>(1, 4096 / n), [&](int64_t lo, int64_t hi) {
    std::vector<A> buf(std::is_same_v<T, A> ? 0 : n);
    for (int64_t r = lo; r < hi; ++r) {
      A* b = buf.empty() ? reinterpret_cast<A*>(out + r * n) : buf.data();
      const A* src = reinterpret_cast<const A*>(x + r * n);
      if (!buf.empty()) {
        for (int64_t i = 0; i < n; ++i) b[i] = A(float_of(x[r * n + i]));
        src = b;
      }
      if (n >= kLanes<A>) {
        fwht_row<A>(src, b, n, scale);
      } else {
        if (src != b) std::copy(src, src + n, b);
        fwht_short_row<A>(b, n, scale);
      }
      if (!buf.empty())
        for (int64_t i = 0; i < n; ++i) out[r * n + i] = T(b[i]);
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

// The SRHT tables' draws in vectorised integer loops: D's signs, and the kept rows by Feistel passes.
template <typename A>
SK_CLONES static void srht_signs(const SrhtParams& p, int64_t lo, int64_t hi, A* __restrict sign) {
  for (int64_t j = lo; j < hi; ++j) sign[j] = A(sk_srht_sign(p, sk_u32(j)));
}

// v[i] = feistel(v[i]) for i < count: sk_srht_feistel's forward rounds, a vectorised loop each.
SK_CLONES static void srht_feistel_pass(const SrhtParams& p, sk_u32* __restrict v, int64_t count,
                                        sk_u32* __restrict l) {
  const sk_u32 h = p.half_bits, mask = (1u << h) - 1u;
  for (int64_t i = 0; i < count; ++i) l[i] = v[i] >> h, v[i] &= mask;
  for (sk_u32 t = 0; t < 4; ++t)
    for (int64_t i = 0; i < count; ++i) {
      const sk_u32 nr = l[i] ^ sk_srht_f(p, v[i], t);
      l[i] = v[i];
      v[i] = nr;
    }
  for (int64_t i = 0; i < count; ++i) v[i] |= l[i] << h;
}

// perm[lo, hi) = sk_srht_perm(i, false): a pass over every entry, then passes over those still outside
// [0, big_n) (about half as many each time) until none is.
static void srht_kept_rows(const SrhtParams& p, int64_t lo, int64_t hi, sk_u32* perm) {
  const int64_t m = hi - lo;
  std::vector<sk_u32> scratch(m), walk(m);
  std::vector<int64_t> at(m);
  for (int64_t i = 0; i < m; ++i) perm[lo + i] = sk_u32(lo + i);
  srht_feistel_pass(p, perm + lo, m, scratch.data());
  for (;;) {
    int64_t w = 0;
    for (int64_t i = 0; i < m; ++i)
      if (perm[lo + i] >= p.big_n) at[w] = lo + i, walk[w++] = perm[lo + i];
    if (w == 0) return;
    srht_feistel_pass(p, walk.data(), w, scratch.data());
    for (int64_t i = 0; i < w; ++i) perm[at[i]] = walk[i];
  }
}

// SRHT (either direction), one row at a time in a per-thread buffer of big_n values that stays in cache.
// Forward: b = pad(D x), its FWHT, out = scale b[perm]. Transpose: b = 0 but b[perm[i]] = g[i] (the scatter
// that the GPU passes' gather through perm^-1 is), its FWHT, out = scale D b (first n). The signs and the k
// kept rows depend on the column alone: tables once per call, from the header's draws; the arithmetic is
// the passes', so the values are bitwise the GPU kernels'.
template <typename T, typename A>
SK_CLONES_FLAT static void srht_row(const SrhtParams& p, bool transpose, const T* __restrict x, T* __restrict out,
                                    const A* __restrict sign, const sk_u32* __restrict perm, A* __restrict b) {
  const int64_t big = p.big_n, n = p.n, k = p.k;
  if (transpose) {
    std::fill(b, b + big, A(0));
    for (int64_t i = 0; i < k; ++i) b[perm[i]] = A(x[i]);
  } else {
    for (int64_t j = 0; j < n; ++j) b[j] = sign[j] * A(x[j]);
    std::fill(b + n, b + big, A(0));
  }
  if (big >= kLanes<A>) {
    fwht_row<A>(b, b, big, A(1));
  } else {
    fwht_short_row<A>(b, big, A(1));
  }
  const A scale = A(p.scale);
  if (transpose) {
    for (int64_t j = 0; j < n; ++j) out[j] = T(sign[j] * b[j] * scale);
  } else {
    for (int64_t i = 0; i < k; ++i) out[i] = T(b[perm[i]] * scale);
  }
}

static void srht(const SrhtArgs& a) {
  const SrhtParams p = srht_params(a);
  if (p.rows == 0) return;
  dispatch_float<true>(a.x.dtype, "srht", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const int64_t n = p.n, k = p.k, big = p.big_n, in = a.transpose ? k : n, on = a.transpose ? n : k;
    std::vector<A> sign(n);
    std::vector<sk_u32> perm(k);
    parallel_for(n, 4096, [&](int64_t lo, int64_t hi) { srht_signs<A>(p, lo, hi, sign.data()); });
    parallel_for(k, 1024, [&](int64_t lo, int64_t hi) { srht_kept_rows(p, lo, hi, perm.data()); });
    const T* x = a.x.ptr<const T>();
    T* out = a.out.ptr<T>();
    parallel_for(p.rows, std::max<int64_t>(1, 4096 / big), [&](int64_t lo, int64_t hi) {
      std::vector<A> b(big);
      for (int64_t r = lo; r < hi; ++r)
        srht_row<T, A>(p, a.transpose, x + r * in, out + r * on, sign.data(), perm.data(), b.data());
    });
  });
}

void register_sketch(Registry& r) {
  r.add<SketchMatrixArgs>("sketch_matrix", Backend::cpu, &generate);
  r.add<FwhtArgs>("fwht", Backend::cpu, &fwht);
  r.add<SketchArgs>("sketch", Backend::cpu, &sparse_sketch);
  r.add<SketchArgs>("sketch_transpose", Backend::cpu, &sparse_sketch);
  r.add<SrhtArgs>("srht", Backend::cpu, &srht);
  r.add<SrhtArgs>("srht_transpose", Backend::cpu, &srht);
}

}  // namespace swisk::cpu
