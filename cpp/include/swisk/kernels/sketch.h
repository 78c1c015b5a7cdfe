// Sketch operators, written once for the CPU backend, CUDA and Metal: every entry of the k x n operator S
// is a pure function of (seed, row, column) through Philox4x32-10 (Salmon et al., SC'11), so any tile
// comes out the same on every backend and thread count, and the backward regenerates S.
//   key = (seed & 0xffffffff, seed >> 32); counter = (column, row, kind id, 0) for the dense kinds,
//   (column, step, kind id, 0) for sparse-sign's selection steps.
// The fast Walsh-Hadamard transform and the SRHT: swisk/kernels/hadamard.h.
#pragma once

#include "swisk/kernels/dialect.h"

// The operator kinds as (id, name), ids 0, 1, ... in order; the id is also the Philox stream word.
#define SWISK_SKETCHES(X) X(0, gaussian) X(1, rademacher) X(2, sparse_sign)

#define SK_SKETCH_ENUM(id, name) SK_SKETCH_##name = id,
enum SkSketch { SWISK_SKETCHES(SK_SKETCH_ENUM) };
#undef SK_SKETCH_ENUM
#define SK_SKETCH_PLUS_ONE(id, name) +1
#define SWISK_NUM_SKETCHES (0 SWISK_SKETCHES(SK_SKETCH_PLUS_ONE))

// Sparse-sign keeps a column's chosen rows (Floyd's sampling checks each draw against them) in shared
// memory on the GPUs, SWISK_SKETCH_THREADS columns per block: no local-memory traffic.
#define SWISK_SKETCH_MAX_NNZ 64
#define SWISK_SKETCH_THREADS 128
#define SWISK_SKETCH_SHARED(K) ((K) == SK_SKETCH_sparse_sign ? SWISK_SKETCH_THREADS * SWISK_SKETCH_MAX_NNZ : 1)

// A tile of S: rows r0 .. r0 + rows, columns c0 .. c0 + cols, written row-major (leading dim cols).
struct SketchParams {
  sk_u32 k, n;              // S is k x n
  sk_u32 r0, rows;          // tile rows
  sk_u32 c0, cols;          // tile columns
  sk_u32 seed_lo, seed_hi;  // the Philox key
  sk_u32 kind;              // an id of SWISK_SKETCHES
  sk_u32 nnz;               // non-zeros per column (sparse-sign)
  float scale;              // 1/sqrt(k) (dense) or 1/sqrt(nnz), rounded once on the host
  // 0: one operator of seed. T >= 1: a stack of T tiles, term t of seed sketch_term_seed(seed, stream0 +
  // t·stream_step) at t·rows·cols in out (a layer's operators, from one launch).
  sk_u32 terms;
  sk_u32 stream0, stream_step;
};

struct SkU4 {
  sk_u32 x, y, z, w;
};
// A Philox key: an operator's seed (a term's own for a stack of them).
struct SkKey {
  sk_u32 lo, hi;
};

// The high word of a 32 x 32-bit product (64-bit multiply on every target; one instruction on GPUs).
SWISK_HD sk_u32 sk_mulhi(sk_u32 a, sk_u32 b) { return sk_u32((sk_u64(a) * sk_u64(b)) >> 32); }

// Philox4x32-10: ten rounds of two 32 x 32 -> 64-bit multiplies, the key bumped by the Weyl constants.
SWISK_HD SkU4 sk_philox4x32_10(SkU4 c, sk_u32 k0, sk_u32 k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const sk_u32 lo0 = 0xD2511F53u * c.x, hi0 = sk_mulhi(0xD2511F53u, c.x);
    const sk_u32 lo1 = 0xCD9E8D57u * c.z, hi1 = sk_mulhi(0xCD9E8D57u, c.z);
    SkU4 o;
    o.x = hi1 ^ c.y ^ k0;
    o.y = lo1;
    o.z = hi0 ^ c.w ^ k1;
    o.w = lo0;
    c = o;
  }
  return c;
}

// The per-term helpers take the parameters by reference (constant memory on Metal) and the term's key
// by value: a copy of the parameters would be thread memory, which those references cannot bind.
// The four words drawn for (col, word1) in key's kind stream; without a key, p's seed.
SWISK_HD SkU4 sk_sketch_draw(SWISK_CONST SketchParams& p, SkKey key, sk_u32 col, sk_u32 word1) {
  SkU4 c;
  c.x = col;
  c.y = word1;
  c.z = p.kind;
  c.w = 0;
  return sk_philox4x32_10(c, key.lo, key.hi);
}
SWISK_HD SkKey sketch_key(SWISK_CONST SketchParams& p) {
  SkKey key;
  key.lo = p.seed_lo;
  key.hi = p.seed_hi;
  return key;
}
SWISK_HD SkU4 sk_sketch_draw(SWISK_CONST SketchParams& p, sk_u32 col, sk_u32 word1) {
  return sk_sketch_draw(p, sketch_key(p), col, word1);
}

// A uniform in (0, 1]: the top 24 bits plus one, times 2^-24 (exact in fp32).
SWISK_FN float sk_unit_open0(sk_u32 u) { return float((u >> 8) + 1u) * 5.9604644775390625e-8f; }

// Box-Muller's logarithm and cosine from fp32 +, -, ×, fma, sqrt, rint and bit moves alone, each
// correctly rounded on every backend (no vendor log or cos), so a Gaussian entry is bitwise the same on
// the CPU, CUDA and Metal, and the CPU's loop vectorises. The polynomials are our own fits, checked
// over every value u takes (u = j·2^-24, j = 1..2^24) against fp64: ln within 0.91 ulp, cos within
// 1.9 ulp. Write every step as fma or a single rounding: a contracted a·b + c would differ by backend.
// ln u = e·ln 2 + log1p(f), u = 2^e·(1 + f), f in [√½ − 1, √2 − 1] (exact: Sterbenz), log1p(f) =
// f + f²·(−½ + f·P(f)); ln 2 in two parts, the first exact times e.
SWISK_FN float sk_ln_unit(float u) {
  const sk_u32 bits = sk_float_bits(u);
  float e = float(sk_i32(bits >> 23) - 127);
  float m = sk_bits_float((bits & 0x007fffffu) | 0x3f800000u);  // in [1, 2)
  const bool big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  e = big ? e + 1.0f : e;
  const float f = m - 1.0f;
  float q = 6.561370939e-02f;
  q = sk_fma(q, f, -1.150150001e-01f);
  q = sk_fma(q, f, 1.187253296e-01f);
  q = sk_fma(q, f, -1.243078858e-01f);
  q = sk_fma(q, f, 1.422475278e-01f);
  q = sk_fma(q, f, -1.666691303e-01f);
  q = sk_fma(q, f, 2.000185400e-01f);
  q = sk_fma(q, f, -2.500002384e-01f);
  q = sk_fma(q, f, 3.333331645e-01f);
  const float f2 = f * f;
  const float l = sk_fma(f2, sk_fma(f, q, -0.5f), f);
  return sk_fma(e, 6.93359375e-01f, sk_fma(e, -2.121944401e-04f, l));
}

// cos 2πu for u in [0, 1]: 4u = q + r with q = rint(4u), |r| ≤ ½ (both exact); cos(πr/2) = 1 + s·C(s)
// and sin(πr/2) = r·S(s), s = r², picked and signed by q mod 4.
SWISK_FN float sk_cos_2pi_unit(float u) {
  const float t = 4.0f * u;
  const float q = sk_rint(t);
  const float r = t - q;
  const float s = r * r;
  float c = 9.046619525e-04f;
  c = sk_fma(c, s, -2.086057700e-02f);
  c = sk_fma(c, s, 2.536692917e-01f);
  c = sk_fma(c, s, -1.233700514e+00f);
  c = sk_fma(c, s, 1.0f);
  float n = -4.596644547e-03f;
  n = sk_fma(n, s, 7.967770845e-02f);
  n = sk_fma(n, s, -6.459631324e-01f);
  n = sk_fma(n, s, 1.570796251e+00f);
  n = r * n;
  const sk_i32 quad = sk_i32(q) & 3;
  const float v = (quad & 1) ? n : c;
  return ((quad + 1) & 2) ? -v : v;
}

// A Gaussian entry, in fp32, from two words: Box-Muller's pair sqrt(-2 ln u1) cos(2 pi u2) and (odd)
// sqrt(-2 ln u1) sin(2 pi u2) = ... cos(2 pi (u2 - 1/4)), u2 - 1/4 exact (multiples of 2^-24). The
// radius (from w0) is shared by a pair of columns; every path computes radius × cosine × scale.
SWISK_FN float sketch_gaussian_radius(sk_u32 w0) { return sk_sqrt(-2.0f * sk_ln_unit(sk_unit_open0(w0))); }
SWISK_FN float sketch_gaussian_of(SWISK_CONST SketchParams& p, float radius, sk_u32 w1, bool odd) {
  const float u2 = sk_unit_open0(w1);
  return radius * sk_cos_2pi_unit(odd ? u2 - 0.25f : u2) * p.scale;
}

// Rademacher entries take one bit each: entry (row, col) is negative where bit col mod 32 of word
// (col / 32) mod 4 of the draw (col / 128, row) is set, so one draw serves 128 entries of a row.
SWISK_FN float sketch_rademacher_value(SWISK_CONST SketchParams& p, SkU4 r, sk_u32 col) {
  const sk_u32 m = (col >> 5) & 3u;
  const sk_u32 w = m == 0u ? r.x : m == 1u ? r.y : m == 2u ? r.z : r.w;
  return ((w >> (col & 31u)) & 1u) ? -p.scale : p.scale;
}

// Step m of a sparse-sign column from its draw r (Floyd's sampling: the step draws t uniform in [0, j],
// j = k - nnz + m, and takes t unless an earlier step took it, then j): its row, recorded in
// taken[m * pitch] (the earlier steps' rows are there), and its value, the sign of r.y's top bit times
// the scale.
SWISK_FN float sketch_sparse_pick(SWISK_CONST SketchParams& p, sk_u32 m, SkU4 r, SWISK_TG sk_u32* taken,
                                  sk_u32 pitch) {
  const sk_u32 j = p.k - p.nnz + m;
  sk_u32 row = sk_mulhi(r.x, j + 1u);  // uniform in [0, j] (multiply-shift, bias < (j+1) 2^-32)
  for (sk_u32 q = 0; q < m; ++q)
    if (taken[q * pitch] == row) row = j;  // j was never drawn before: the taken rows stay distinct
  taken[m * pitch] = row;
  return (r.y >> 31) ? -p.scale : p.scale;
}
// Step m of column col: its draw is (col, m).
SWISK_FN float sketch_sparse_step(SWISK_CONST SketchParams& p, SkKey key, sk_u32 col, sk_u32 m,
                                  SWISK_TG sk_u32* taken, sk_u32 pitch) {
  return sketch_sparse_pick(p, m, sk_sketch_draw(p, key, col, m), taken, pitch);
}

// Sparse-sign column col: its nnz distinct rows; writes those that fall in the tile (the other entries
// are zero, the caller's).
template <typename T>
SWISK_FN void sketch_sparse_column(SWISK_CONST SketchParams& p, SkKey key, sk_u32 col, SWISK_GLOBAL T* out,
                                   SWISK_TG sk_u32* taken, sk_u32 pitch) {
  for (sk_u32 m = 0; m < p.nnz; ++m) {
    const float v = sketch_sparse_step(p, key, col, m, taken, pitch);
    const sk_u32 row = taken[m * pitch];
    if (row >= p.r0 && row - p.r0 < p.rows) out[sk_u64(row - p.r0) * p.cols + (col - p.c0)] = T(v);
  }
}

// The Gaussian entries of the columns 4g .. 4g + 3 of `row` that fall in the tile: the draw (g, row),
// words x, y for columns 4g, 4g + 1 and z, w for 4g + 2, 4g + 3 (the odd column takes the sine), one
// radius per pair. out_row: the tile's row.
template <typename T>
SWISK_FN void sketch_gaussian_group(SWISK_CONST SketchParams& p, SkKey key, sk_u32 row, sk_u32 g,
                                    SWISK_GLOBAL T* out_row) {
  const SkU4 r = sk_sketch_draw(p, key, g, row);
  const float ra = sketch_gaussian_radius(r.x), rb = sketch_gaussian_radius(r.z);
  const float v[4] = {sketch_gaussian_of(p, ra, r.y, false), sketch_gaussian_of(p, ra, r.y, true),
                      sketch_gaussian_of(p, rb, r.w, false), sketch_gaussian_of(p, rb, r.w, true)};
  for (sk_u32 j = 0; j < 4u; ++j) {
    const sk_u32 col = 4u * g + j;
    if (col >= p.c0 && col - p.c0 < p.cols) out_row[col - p.c0] = T(v[j]);
  }
}

// The seed of a layer's operator `stream`: splitmix64 of (seed + (stream + 1)·golden), 63 bits
// (swisk.reference's term_seed). 64-bit constants from 32-bit halves: one spelling for every dialect.
SWISK_HD sk_u64 sketch_term_seed(sk_u64 seed, sk_u64 stream) {
  sk_u64 z = seed + (stream + 1u) * ((sk_u64(0x9E3779B9u) << 32) | 0x7F4A7C15u);
  z = (z ^ (z >> 30)) * ((sk_u64(0xBF58476Du) << 32) | 0x1CE4E5B9u);
  z = (z ^ (z >> 27)) * ((sk_u64(0x94D049BBu) << 32) | 0x133111EBu);
  return (z ^ (z >> 31)) & ((sk_u64(0x7FFFFFFFu) << 32) | 0xFFFFFFFFu);
}
// The tiles a launch writes, and term t's key (the place in out is the caller's).
SWISK_HD sk_u32 sketch_stack(SWISK_CONST SketchParams& p) { return p.terms > 0u ? p.terms : 1u; }
SWISK_HD SkKey sketch_term_key(SWISK_CONST SketchParams& p, sk_u32 t) {
  if (p.terms == 0u) return sketch_key(p);
  const sk_u64 s = sketch_term_seed((sk_u64(p.seed_hi) << 32) | p.seed_lo, sk_u64(p.stream0) +
                                                                           sk_u64(t) * p.stream_step);
  SkKey key;
  key.lo = sk_u32(s & 0xFFFFFFFFu);
  key.hi = sk_u32(s >> 32);
  return key;
}

// Groups of 2^b columns that the tile's columns c0 .. c0 + cols span.
SWISK_HD sk_u32 sketch_spans(SWISK_CONST SketchParams& p, sk_u32 b) {
  return p.cols == 0u ? 0u : ((p.c0 + p.cols - 1u) >> b) - (p.c0 >> b) + 1u;
}
// Groups of four columns (one Gaussian draw each).
SWISK_HD sk_u32 sketch_groups(SWISK_CONST SketchParams& p) { return sketch_spans(p, 2); }

// Work items over a 1-D grid-stride launch of SWISK_SKETCH_THREADS threads per block and at most 4096
// blocks: one per column (sparse-sign), per group of four columns of a row (Gaussian: one draw
// serves the four), per (row, block of 128 columns, lane) (Rademacher: the lane's bit of the block's
// draw's four words, columns 128 b + lane + 32 m, so a warp's stores are contiguous).
SWISK_HD sk_u64 sketch_items(SWISK_CONST SketchParams& p) {
  if (p.kind == sk_u32(SK_SKETCH_sparse_sign)) return sk_u64(p.cols);
  if (p.kind == sk_u32(SK_SKETCH_gaussian)) return sk_u64(p.rows) * sketch_groups(p);
  return sk_u64(p.rows) * sketch_spans(p, 7) * 32u;
}
SWISK_HD SkGrid sketch_grid(SWISK_CONST SketchParams& p) {
  const sk_u64 blocks = sk_tiles(sketch_items(p), SWISK_SKETCH_THREADS);
  return sk_tile_grid(blocks > 4096 ? 4096 : blocks, sketch_stack(p));  // y: the terms (looped past 65535)
}

// One operator's tile (of the Philox key `key`): the grid's x walks its items; taken: the block's
// SWISK_SKETCH_SHARED(K) shared words.
template <int K, typename T>
SWISK_FN void sketch_matrix_tile(SkIdx id, SWISK_CONST SketchParams& p, SkKey key, SWISK_GLOBAL T* out,
                                 SWISK_TG sk_u32* taken) {
  const sk_u64 stride = sk_u64(id.gdx) * id.bdx, items = sketch_items(p);
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < items; e += stride) {
    if (K == SK_SKETCH_sparse_sign) {
      sketch_sparse_column<T>(p, key, p.c0 + sk_u32(e), out, taken + id.tx, id.bdx);
    } else if (K == SK_SKETCH_gaussian) {
      const sk_u32 ng = sketch_groups(p), row = sk_u32(e / ng);
      sketch_gaussian_group<T>(p, key, p.r0 + row, (p.c0 >> 2) + sk_u32(e % ng), out + sk_u64(row) * p.cols);
    } else {
      const sk_u64 per_row = sk_u64(sketch_spans(p, 7)) * 32u;
      const sk_u32 row = sk_u32(e / per_row), b = (p.c0 >> 7) + sk_u32(e % per_row / 32u), lane = sk_u32(e % 32u);
      const SkU4 r = sk_sketch_draw(p, key, b, p.r0 + row);
      for (sk_u32 m = 0; m < 4u; ++m) {
        const sk_u32 col = 128u * b + 32u * m + lane;
        if (col >= p.c0 && col - p.c0 < p.cols)
          out[sk_u64(row) * p.cols + (col - p.c0)] = T(sketch_rademacher_value(p, r, col));
      }
    }
  }
}

// The generation kernel's body: every term of the stack (the grid's y walks them) or the one operator.
template <int K, typename T>
SWISK_FN void sketch_matrix_body(SkIdx id, SWISK_CONST SketchParams& p, SWISK_GLOBAL T* out,
                                 SWISK_TG sk_u32* taken) {
  for (sk_u32 t = id.by; t < sketch_stack(p); t += id.gdy)
    sketch_matrix_tile<K, T>(id, p, sketch_term_key(p, t), out + sk_u64(t) * p.rows * p.cols, taken);
}
