// The Hadamard side of the sketch family, written once for the CPU backend, CUDA and Metal: the fast
// Walsh-Hadamard transform's GPU passes and the SRHT's (signs, permutation, in/out kernels; its FWHT
// runs the same passes on an fp32 workspace).
#pragma once

#include "swisk/kernels/sketch.h"

// ---- Fast Walsh-Hadamard transform: y = scale * H_n x along the last dimension (n a power of two, H_n
// the Sylvester +-1 matrix), butterflies (a, b) -> (a + b, a - b) over distances h = 1, 2, ..., n/2, in
// that order on every backend (so bitwise the same result), fp32 in registers.
// GPUs, one read and one write per pass: the chunk pass gives a block a chunk of 2^L values (rows of n
// <= 2^13 packed together into chunks of 2^13, or one row of n = 2^L), 2^(L-5) threads and 32 values per
// thread in registers. The chunk goes through shared memory in three layouts whose registers hold
// index bits [0, 5), [5, 10), [L - 5, L): the butterflies of those distances run in registers; the
// last layout is the coalesced one that loads and stores global memory. Metal: L = 13 (32 KiB of
// threadgroup memory). CUDA: L up to SWISK_FWHT_CUDA_CHUNK_LOG2 = 15 (one pass for n <= 2^15: 1024
// threads and 128 KiB of dynamic shared memory; a build may set 13 or 14 to compare on a device).
// Longer rows then take one register pass per 5 further distances (a thread's 32 values 2^lo apart).
// The scale is applied by the last pass.
#define SWISK_FWHT_THREADS 256  // the register passes' and SRHT kernels' blocks; the chunk pass's at L = 13
#define SWISK_FWHT_REGS 32
#define SWISK_FWHT_CHUNK_LOG2 13  // the smallest chunk (and Metal's)
#define SWISK_FWHT_CHUNK (SWISK_FWHT_THREADS * SWISK_FWHT_REGS)
#ifndef SWISK_FWHT_CUDA_CHUNK_LOG2
#define SWISK_FWHT_CUDA_CHUNK_LOG2 15
#endif
#define SWISK_FWHT_METAL_CHUNK_LOG2 13

struct FwhtParams {
  sk_u32 rows, n;   // x is (rows, n)
  sk_u32 lo, bits;  // this pass's distances: 2^lo ... 2^(lo + bits - 1)
  float scale;      // applied by the last pass (1 elsewhere)
  sk_u32 pad;
};

SWISK_HD sk_u64 fwht_values(SWISK_CONST FwhtParams& p) { return sk_u64(p.rows) * p.n; }
// The chunk pass's L (log2 of its chunk), threads per block and chunks.
SWISK_HD sk_u32 fwht_chunk_log2(SWISK_CONST FwhtParams& p) {
  return p.bits > SWISK_FWHT_CHUNK_LOG2 ? p.bits : SWISK_FWHT_CHUNK_LOG2;
}
SWISK_HD sk_u32 fwht_chunk_threads(SWISK_CONST FwhtParams& p) { return 1u << (fwht_chunk_log2(p) - 5); }
SWISK_HD sk_u64 fwht_units(SWISK_CONST FwhtParams& p) { return sk_tiles(fwht_values(p), 1u << fwht_chunk_log2(p)); }
SWISK_HD SkGrid fwht_shared_grid(SWISK_CONST FwhtParams& p) {
  return sk_tile_grid(fwht_units(p) > 65535 ? 65535 : fwht_units(p), 1);
}
// A register pass's items: one per group of 2^bits values.
SWISK_HD sk_u64 fwht_groups(SWISK_CONST FwhtParams& p) { return fwht_values(p) >> p.bits; }
SWISK_HD SkGrid fwht_stage_grid(SWISK_CONST FwhtParams& p) {
  const sk_u64 blocks = sk_tiles(fwht_groups(p), SWISK_FWHT_THREADS);
  return sk_tile_grid(blocks > 4096 ? 4096 : blocks, 1);
}

// The butterflies of distances 2^b, from <= b < to, on a thread's 32 values (index bits = register bits).
SWISK_FN void fwht_registers(SWISK_THREAD float* v, sk_u32 from, sk_u32 to) {
  SWISK_UNROLL
  for (sk_u32 b = 0; b < 5; ++b) {
    if (b < from || b >= to) continue;
    SWISK_UNROLL
    for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) {
      if (j & (1u << b)) continue;
      const float u = v[j], w = v[j + (1u << b)];
      v[j] = u + w;
      v[j + (1u << b)] = u - w;
    }
  }
}

// Shared memory. The layout starting at bit s holds in thread t's register j the value fwht_at(t, j, s)
// (registers = index bits [s, s + 5), the thread's L - 5 bits fill the others in order); s = L - 5
// gives t + 2^(L-5) j, the coalesced order. Value i sits at slot i + i / 32 (Pad: CUDA; every access is
// a per-thread base plus a constant, 1/32 more memory) or at fwht_swizzle(i) (bits 5-9 XORed into bits
// 0-4: Metal, whose 32 KiB hold no padding; a base XORed with a constant and plus a constant). Either
// way the lanes of a warp hit 32 different banks in every layout. fwht_slot is the closed form for
// s = 0, 5 and L - 5 >= 8.
SWISK_HD sk_u32 fwht_at(sk_u32 t, sk_u32 j, sk_u32 s) {
  return (t & ((1u << s) - 1u)) | (j << s) | ((t >> s) << (s + 5));
}
SWISK_HD sk_u32 fwht_swizzle(sk_u32 i) { return i ^ ((i >> 5) & 31u); }
template <bool Pad>
SWISK_HD sk_u32 fwht_slot(sk_u32 t, sk_u32 j, sk_u32 s) {
  if (Pad) {
    if (s == 0) return 33u * t + j;
    const sk_u32 a = (t & ((1u << s) - 1u)) | ((t >> s) << (s + 5));  // fwht_at(t, 0, s)
    return a + (a >> 5) + (j << s) + (j << (s - 5));
  }
  if (s == 0) return 32u * t + ((t & 31u) ^ j);
  if (s == 5) return (((t & 31u) ^ j) | ((t >> 5) << 10)) + 32u * j;
  return (t ^ ((t >> 5) & 31u) ^ ((j << (s - 5)) & 31u)) + (j << s);
}
// The floats of a chunk's shared buffer.
#define SWISK_FWHT_BUFFER(L, Pad) ((1u << (L)) + ((Pad) ? 1u << ((L) - 5) : 0u))

#if defined(SWISK_BARRIER)
// Chunk pass (p.lo = 0, p.bits = min(log2 n, L)) with 2^(L-5) threads; buf: SWISK_FWHT_BUFFER(L, Pad)
// floats. Values past the end enter as zeros and stay out: they only meet rows of their own.
template <int L, bool Pad, typename T>
SWISK_FN void fwht_shared_body(SkIdx id, SWISK_CONST FwhtParams& p, SWISK_GLOBAL const T* x, SWISK_GLOBAL T* out,
                               SWISK_TG float* buf) {
  const sk_u32 threads = 1u << (L - 5), whole = 1u << L, t = id.tx;
  const sk_u32 bits = L > SWISK_FWHT_CHUNK_LOG2 ? sk_u32(L) : p.bits;  // past 2^13 a chunk is one whole row
  const sk_u64 total = fwht_values(p);
  for (sk_u64 c = id.bx; c < fwht_units(p); c += id.gdx) {
    const sk_u64 base = c * whole;
    const sk_u32 size = total - base < whole ? sk_u32(total - base) : whole;
    SWISK_GLOBAL const T* xc = x + base;
    SWISK_GLOBAL T* oc = out + base;
    float v[SWISK_FWHT_REGS];
    if (L > SWISK_FWHT_CHUNK_LOG2 || size == whole) {
      SWISK_UNROLL
      for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) v[j] = float(xc[t + threads * j]);
    } else {
      SWISK_UNROLL
      for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) v[j] = t + threads * j < size ? float(xc[t + threads * j]) : 0.0f;
    }
    SWISK_UNROLL
    for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) buf[fwht_slot<Pad>(t, j, L - 5)] = v[j];
    sk_u32 done = 0;  // distances 2^b, b < done, applied
    SWISK_UNROLL
    for (sk_u32 layout = 0; layout < 3; ++layout) {
      const sk_u32 s = layout == 0 ? 0u : layout == 1 ? 5u : sk_u32(L - 5);
      SWISK_BARRIER();
      SWISK_UNROLL
      for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) v[j] = buf[fwht_slot<Pad>(t, j, s)];
      const sk_u32 end = s + 5 < bits ? s + 5 : bits;
      if (end > done) {
        fwht_registers(v, done - s, end - s);
        done = end;
      }
      if (layout < 2) {
        SWISK_UNROLL
        for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) buf[fwht_slot<Pad>(t, j, s)] = v[j];
      }
    }
    SWISK_BARRIER();
    if (L > SWISK_FWHT_CHUNK_LOG2 || size == whole) {
      SWISK_UNROLL
      for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) oc[t + threads * j] = T(v[j] * p.scale);
    } else {
      SWISK_UNROLL
      for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j)
        if (t + threads * j < size) oc[t + threads * j] = T(v[j] * p.scale);
    }
  }
}
#endif

// Register pass (p.lo >= 13, p.bits <= 5), in place: a thread's 2^bits values 2^lo apart, coalesced
// across threads.
template <typename T>
SWISK_FN void fwht_stage_body(SkIdx id, SWISK_CONST FwhtParams& p, SWISK_GLOBAL T* out) {
  const sk_u64 stride = sk_u64(id.gdx) * id.bdx, span = sk_u64(1) << p.lo;
  const sk_u32 count = 1u << p.bits;
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < fwht_groups(p); e += stride) {
    const sk_u64 i0 = ((e / span) << (p.lo + p.bits)) + e % span;  // the group's first value
    float v[SWISK_FWHT_REGS];
    SWISK_UNROLL
    for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j) v[j] = j < count ? float(out[i0 + (sk_u64(j) << p.lo)]) : 0.0f;
    fwht_registers(v, 0, p.bits);
    SWISK_UNROLL
    for (sk_u32 j = 0; j < SWISK_FWHT_REGS; ++j)
      if (j < count) out[i0 + (sk_u64(j) << p.lo)] = T(v[j] * p.scale);
  }
}

// ---- SRHT: x (..., n) -> (1/sqrt(k)) (H_N D x)[rows], N = n rounded up to a power of two (x zero-padded),
// D = diag(signs), rows = the first k values of a keyed permutation of [0, N). Pure functions of the seed:
//   sign j: the top bit of the draw (j, 0, SK_SRHT_SIGNS, 0); permutation: a 4-round Feistel network on
//   the bits of N rounded up to even (round t's function: the draw (half, t, SK_SRHT_PERM, 0)), walking
//   the cycle back into [0, N). On the GPUs the transpose applies the inverse permutation, so neither
//   side scatters, and the passes read D and the permutation from tables that a first kernel writes once
//   per call (the CPU: cpu/sketch.cpp, row by row).
#define SK_SRHT_SIGNS 3u
#define SK_SRHT_PERM 4u

struct SrhtParams {
  sk_u32 rows, n, big_n, k;  // x (rows, n), padded to big_n, k rows kept
  sk_u32 seed_lo, seed_hi;
  sk_u32 half_bits;          // Feistel half width: ceil(log2 big_n / 2)
  sk_u32 transpose;          // 1: the transpose (its table: the inverse permutation)
  float scale;               // 1/sqrt(k), rounded once on the host
  sk_u32 row0;               // GPUs: the pass's first row of x (rows: the pass's count)
  sk_u32 cap;                // GPUs: rows the workspace holds (the tables follow them)
  sk_u32 pad;
};

SWISK_HD sk_u32 sk_srht_draw(SWISK_CONST SrhtParams& p, sk_u32 a, sk_u32 b, sk_u32 stream) {
  SkU4 c;
  c.x = a;
  c.y = b;
  c.z = stream;
  c.w = 0;
  return sk_philox4x32_10(c, p.seed_lo, p.seed_hi).x;
}

SWISK_HD float sk_srht_sign(SWISK_CONST SrhtParams& p, sk_u32 j) {
  return (sk_srht_draw(p, j, 0, SK_SRHT_SIGNS) >> 31) ? -1.0f : 1.0f;
}

// The Feistel network's round function F_t on an h-bit half.
SWISK_HD sk_u32 sk_srht_f(SWISK_CONST SrhtParams& p, sk_u32 half, sk_u32 t) {
  return sk_srht_draw(p, half, t, SK_SRHT_PERM) & ((1u << p.half_bits) - 1u);
}

// One 4-round Feistel permutation of [0, 2^(2h)) (inverse = false) or its inverse.
SWISK_HD sk_u32 sk_srht_feistel(SWISK_CONST SrhtParams& p, sk_u32 v, bool inverse) {
  const sk_u32 h = p.half_bits;
  sk_u32 l = v >> h, r = v & ((1u << h) - 1u);
  for (sk_u32 t = 0; t < 4; ++t) {
    if (inverse) {  // (l, r) = (r' ^ F(l'), l')
      const sk_u32 nl = r ^ sk_srht_f(p, l, 3 - t);
      r = l;
      l = nl;
    } else {  // (l, r) = (r, l ^ F(r))
      const sk_u32 nr = l ^ sk_srht_f(p, r, t);
      l = r;
      r = nr;
    }
  }
  return (l << h) | r;
}

// perm(v) (inverse = false) or perm^-1(v), v < big_n: the Feistel permutation walked back into [0, big_n).
// Walking on from a v >= big_n continues the same walk.
SWISK_HD sk_u32 sk_srht_perm(SWISK_CONST SrhtParams& p, sk_u32 v, bool inverse) {
  do {
    v = sk_srht_feistel(p, v, inverse);
  } while (v >= p.big_n);
  return v;
}

// The GPU workspace: a pass's rows (cap x big_n, fp32; the rows of x go through it cap at a time, so it
// stays within SWISK_SRHT_WORK_FLOATS), then the tables, fp32 words: D's signs (n), then, as bits, the
// kept rows perm(i), i < k (forward) or the inverse permutation over [0, big_n) (transpose). Element e of
// a pass is its row e / width (x's row row0 + that).
#define SWISK_SRHT_WORK_FLOATS (1u << 24)
SWISK_HD sk_u64 srht_table_offset(SWISK_CONST SrhtParams& p) { return sk_u64(p.cap) * p.big_n; }
SWISK_HD sk_u64 srht_table_items(SWISK_CONST SrhtParams& p) { return sk_u64(p.n) + (p.transpose ? p.big_n : p.k); }

SWISK_FN void srht_tables_at(SWISK_CONST SrhtParams& p, sk_u64 e, SWISK_GLOBAL float* work) {
  SWISK_GLOBAL float* tab = work + srht_table_offset(p);
  tab[e] = e < p.n ? sk_srht_sign(p, sk_u32(e)) : sk_bits_float(sk_srht_perm(p, sk_u32(e - p.n), p.transpose != 0));
}

// Element e of each pass, from the tables. Forward: work = pad(D x), then the FWHT on work, then out =
// scale work[perm]. Transpose: work = g[perm^-1] (0 past k), the FWHT, then out = scale D work (first n).
template <typename T>
SWISK_FN void srht_in_at(SWISK_CONST SrhtParams& p, sk_u64 e, SWISK_GLOBAL const T* x, SWISK_GLOBAL float* work) {
  const sk_u64 r = e / p.big_n;
  const sk_u32 j = sk_u32(e % p.big_n);
  work[e] = j < p.n ? work[srht_table_offset(p) + j] * float(x[(p.row0 + r) * p.n + j]) : 0.0f;
}
template <typename T>
SWISK_FN void srht_out_at(SWISK_CONST SrhtParams& p, sk_u64 e, SWISK_GLOBAL const float* work, SWISK_GLOBAL T* out) {
  const sk_u64 r = e / p.k;
  const sk_u32 i = sk_u32(e % p.k);
  const sk_u32 row = sk_float_bits(work[srht_table_offset(p) + p.n + i]);
  out[sk_u64(p.row0) * p.k + e] = T(work[r * p.big_n + row] * p.scale);
}
template <typename T>
SWISK_FN void srht_t_in_at(SWISK_CONST SrhtParams& p, sk_u64 e, SWISK_GLOBAL const T* g, SWISK_GLOBAL float* work) {
  const sk_u64 r = e / p.big_n;
  const sk_u32 q = sk_float_bits(work[srht_table_offset(p) + p.n + sk_u32(e % p.big_n)]);
  work[e] = q < p.k ? float(g[(p.row0 + r) * p.k + q]) : 0.0f;
}
template <typename T>
SWISK_FN void srht_t_out_at(SWISK_CONST SrhtParams& p, sk_u64 e, SWISK_GLOBAL const float* work, SWISK_GLOBAL T* out) {
  const sk_u64 r = e / p.n;
  const sk_u32 j = sk_u32(e % p.n);
  out[sk_u64(p.row0) * p.n + e] = T(work[srht_table_offset(p) + j] * work[r * p.big_n + j] * p.scale);
}

// The passes' items and grid (SWISK_FWHT_THREADS threads per block, grid-stride, at most 4096 blocks).
SWISK_HD SkGrid srht_grid(sk_u64 items) {
  const sk_u64 blocks = sk_tiles(items, SWISK_FWHT_THREADS);
  return sk_tile_grid(blocks > 4096 ? 4096 : blocks, 1);
}
// The GPUs' pass from row r0 of a call's p (at most p.cap rows), and its in and out kernels' grids.
SWISK_HD SrhtParams srht_pass(SrhtParams p, sk_u64 r0) {
  const sk_u32 left = p.rows - sk_u32(r0);
  p.row0 = sk_u32(r0);
  p.rows = left < p.cap ? left : p.cap;
  return p;
}
SWISK_HD SkGrid srht_in_grid(SWISK_CONST SrhtParams& q) { return srht_grid(sk_u64(q.rows) * q.big_n); }
SWISK_HD SkGrid srht_out_grid(SWISK_CONST SrhtParams& q) {
  return srht_grid(sk_u64(q.rows) * (q.transpose ? q.n : q.k));
}
SWISK_FN void srht_tables_body(SkIdx id, SWISK_CONST SrhtParams& p, SWISK_GLOBAL float* work) {
  const sk_u64 stride = sk_u64(id.gdx) * id.bdx;
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < srht_table_items(p); e += stride) srht_tables_at(p, e, work);
}
#define SWISK_SRHT_BODY(name, items, A, B)                                                              \
  template <typename T>                                                                                  \
  SWISK_FN void name##_body(SkIdx id, SWISK_CONST SrhtParams& p, A a, B b) {                            \
    const sk_u64 stride = sk_u64(id.gdx) * id.bdx;                                                     \
    for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < (items); e += stride) name##_at<T>(p, e, a, b); \
  }
SWISK_SRHT_BODY(srht_in, sk_u64(p.rows) * p.big_n, SWISK_GLOBAL const T*, SWISK_GLOBAL float*)
SWISK_SRHT_BODY(srht_out, sk_u64(p.rows) * p.k, SWISK_GLOBAL const float*, SWISK_GLOBAL T*)
SWISK_SRHT_BODY(srht_t_in, sk_u64(p.rows) * p.big_n, SWISK_GLOBAL const T*, SWISK_GLOBAL float*)
SWISK_SRHT_BODY(srht_t_out, sk_u64(p.rows) * p.n, SWISK_GLOBAL const float*, SWISK_GLOBAL T*)
#undef SWISK_SRHT_BODY
