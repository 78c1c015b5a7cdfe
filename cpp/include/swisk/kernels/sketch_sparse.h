// Sparse-sign x S^T and g S on the GPUs without forming S (the CPU's kernel: cpu/sketch_sparse.h).
// g S gathers: out[r, j] = Σ_m ±g[r, row(j, m)] from a column table. x S^T needs S by rows, in a fixed
// order so that every output has one owner and one summation order (no atomics): chunks of columns
// generate their entries into shared memory and sort them by (row, column), with where each row starts;
// then out[r, i] = Σ ±x[r, col] over row i's entries, chunk by chunk (so ascending in column). The
// magnitude multiplies each sum once: 1/sqrt(nnz) as the op's dtype rounds it, S's entries in that dtype.
#pragma once

#include "swisk/kernels/sketch.h"

#define SWISK_SPARSE_SORT 2048  // entries per chunk: the sort's shared keys, 2 words each
#define SWISK_SPARSE_THREADS 256
#define SWISK_SPARSE_SIGN 0x80000000u  // an entry word: its column (or row) | this bit when negative
// The products take SWISK_SPARSE_ROWS rows of x or g per thread, its sums a register row: S's words are
// read once per group. x S^T: the rows through shared tiles of SWISK_SPARSE_COLS columns (32 KiB of
// fp32); g S: the rows straight from g (through L1: on an H200 0.53 ms at b4096 1024 -> 16384 against
// 0.61 ms through shared tiles of g).
#define SWISK_SPARSE_ROWS 8
#define SWISK_SPARSE_COLS 1024

struct SparseParams {
  SketchParams s;    // the operator: k, n, seed, nnz, scale (rows = k, cols = n)
  sk_u32 rows;       // vectors: rows of x (n values each) or of g (k values)
  sk_u32 chunk;      // columns per chunk
  sk_u32 chunks;     // ceil(n / chunk)
  sk_u32 sort;       // a chunk's sort width: a power of two >= chunk * nnz, <= SWISK_SPARSE_SORT
  float mult;        // the entries' magnitude in the op's dtype
  sk_u32 splits;     // x S^T: ranges of chunks summed apart (few blocks otherwise), then in order
  sk_u32 per_split;  // chunks per range
  sk_u32 pad;
};

// The workspace, in 32-bit words. x S^T: each chunk's row starts (k + 1 per chunk: where row i begins in
// its sorted entries, the last its count), each chunk's sorted entries (sort per chunk, column | sign),
// then with several splits each split's sums (rows x k fp32 bits per split). g S: the column table, step
// m of column j at m n + j (row | sign).
SWISK_HD sk_u64 sparse_sorted_at(SWISK_CONST SparseParams& p) { return sk_u64(p.chunks) * (p.s.k + 1u); }
SWISK_HD sk_u64 sparse_part_at(SWISK_CONST SparseParams& p) {
  return sparse_sorted_at(p) + sk_u64(p.chunks) * p.sort;
}
SWISK_HD sk_u64 sparse_work_words(SWISK_CONST SparseParams& p, bool transpose) {
  if (transpose) return sk_u64(p.s.n) * p.s.nnz;
  return sparse_part_at(p) + (p.splits > 1u ? sk_u64(p.splits) * p.rows * p.s.k : 0u);
}

// The chunking of an operator (s: the whole k x n tile of sketch_params).
SWISK_HD SparseParams sparse_params(SketchParams s, sk_u32 rows, float mult) {
  SparseParams p;
  p.s = s;
  p.rows = rows;
  const sk_u32 most = SWISK_SPARSE_SORT / s.nnz;
  p.chunk = s.n < most ? s.n : most;
  p.chunks = (s.n + p.chunk - 1u) / p.chunk;
  p.sort = 1u;
  while (p.sort < p.chunk * s.nnz) p.sort *= 2u;
  p.mult = mult;
  // x S^T's blocks: (k / SWISK_SPARSE_THREADS) x (rows / SWISK_SPARSE_ROWS). Under 256 of them, ranges of
  // at least 4 chunks each go to blocks of their own, their sums within 2^22 values (a choice from the
  // shape alone, so a shape sums in one order on every GPU).
  const sk_u64 blocks = sk_u64((s.k + SWISK_SPARSE_THREADS - 1u) / SWISK_SPARSE_THREADS) *
                        ((sk_u64(rows) + SWISK_SPARSE_ROWS - 1u) / SWISK_SPARSE_ROWS);
  sk_u64 splits = 1u;
  if (blocks > 0u && blocks < 256u) {
    splits = 256u / blocks;
    const sk_u64 ranges = (p.chunks + 3u) / 4u, cap = (sk_u64(1) << 22) / (sk_u64(rows) * s.k);
    splits = splits < ranges ? splits : ranges;
    splits = splits < cap ? splits : cap;
    splits = splits < 1u ? 1u : splits;
  }
  p.per_split = sk_u32((p.chunks + splits - 1u) / splits);
  p.splits = (p.chunks + p.per_split - 1u) / p.per_split;
  p.pad = 0u;
  return p;
}

// An entry word from a pick's row or column and its value's sign.
SWISK_FN sk_u32 sparse_word(sk_u32 index, float v) { return v < 0.0f ? index | SWISK_SPARSE_SIGN : index; }
// The word's sign as +-1 (a product with it is exact: the sums round as adds of +-v would).
SWISK_FN float sparse_sign_of(sk_u32 w) { return (w & SWISK_SPARSE_SIGN) ? -1.0f : 1.0f; }

// g S's table: a thread per column, its steps' rows in taken (SWISK_SKETCH_MAX_NNZ per thread, pitch bdx).
SWISK_FN void sparse_table_body(SkIdx id, SWISK_CONST SparseParams& p, SWISK_GLOBAL sk_u32* work,
                                SWISK_TG sk_u32* taken) {
  const sk_u32 stride = id.gdx * id.bdx;
  for (sk_u32 j = id.bx * id.bdx + id.tx; j < p.s.n; j += stride)
    for (sk_u32 m = 0; m < p.s.nnz; ++m) {
      const float v = sketch_sparse_step(p.s, sketch_key(p.s), j, m, taken + id.tx, id.bdx);
      work[sk_u64(m) * p.s.n + j] = sparse_word(taken[m * id.bdx + id.tx], v);
    }
}

// The first of key[0 .. count) (ascending) that is >= v.
SWISK_FN sk_u32 sparse_lower_bound(SWISK_TG const sk_u32* key, sk_u32 count, sk_u32 v) {
  sk_u32 lo = 0, hi = count;
  while (lo < hi) {
    const sk_u32 mid = (lo + hi) / 2u;
    if (key[mid] < v) lo = mid + 1u;
    else hi = mid;
  }
  return lo;
}

#if defined(SWISK_BARRIER)  // the block passes: GPUs and their emulators
// A block per chunk: its entries (a thread per column, Floyd's rows straight into the row keys), padded
// to the sort width with keys past every row, sorted by (row, column) (bitonic, sort / 2 compare-swaps
// per step), then written out with the chunk's row starts. row_key, col_key: sort words each.
SWISK_FN void sparse_sort_body(SkIdx id, SWISK_CONST SparseParams& p, SWISK_GLOBAL sk_u32* work,
                               SWISK_TG sk_u32* row_key, SWISK_TG sk_u32* col_key) {
  const sk_u32 nnz = p.s.nnz;
  for (sk_u32 c = id.bx; c < p.chunks; c += id.gdx) {
    const sk_u32 j0 = c * p.chunk, cols = p.s.n - j0 < p.chunk ? p.s.n - j0 : p.chunk, count = cols * nnz;
    for (sk_u32 lj = id.tx; lj < cols; lj += id.bdx)
      for (sk_u32 m = 0; m < nnz; ++m) {
        const float v = sketch_sparse_step(p.s, sketch_key(p.s), j0 + lj, m, row_key + lj * nnz, 1u);
        col_key[lj * nnz + m] = sparse_word(j0 + lj, v);
      }
    for (sk_u32 e = count + id.tx; e < p.sort; e += id.bdx) row_key[e] = col_key[e] = 0xffffffffu;
    SWISK_BARRIER();
    for (sk_u32 size = 2u; size <= p.sort; size *= 2u)
      for (sk_u32 half = size / 2u; half > 0u; half /= 2u) {
        for (sk_u32 t = id.tx; t < p.sort / 2u; t += id.bdx) {
          const sk_u32 a = 2u * t - (t & (half - 1u)), b = a + half;
          const sk_u64 ka = (sk_u64(row_key[a]) << 32) | (col_key[a] & ~SWISK_SPARSE_SIGN);
          const sk_u64 kb = (sk_u64(row_key[b]) << 32) | (col_key[b] & ~SWISK_SPARSE_SIGN);
          if ((ka > kb) == ((a & size) == 0u)) {
            const sk_u32 r = row_key[a], w = col_key[a];
            row_key[a] = row_key[b], col_key[a] = col_key[b];
            row_key[b] = r, col_key[b] = w;
          }
        }
        SWISK_BARRIER();
      }
    SWISK_GLOBAL sk_u32* sorted = work + sparse_sorted_at(p) + sk_u64(c) * p.sort;
    SWISK_GLOBAL sk_u32* starts = work + sk_u64(c) * (p.s.k + 1u);
    for (sk_u32 e = id.tx; e < count; e += id.bdx) sorted[e] = col_key[e];
    for (sk_u32 i = id.tx; i <= p.s.k; i += id.bdx)
      starts[i] = i == p.s.k ? count : sparse_lower_bound(row_key, count, i);
    SWISK_BARRIER();  // the next chunk reuses the keys
  }
}

// x S^T: a block per (group of rows, SWISK_SPARSE_THREADS outputs i, range of chunks), a thread per i.
// The range's columns go through shared memory a tile at a time (the rows' values, rows past x's end as
// zeros, so no row needs a guard); each thread walks its row of S chunk by chunk from its sorted words
// (its starts in each chunk: coalesced across the block), applying the words that fall in the tile, its
// next word loaded while the current one is applied; so every sum runs in S's column order. With one
// range the sums, scaled, are the outputs; with several, each range's go to the workspace and
// sparse_sum_body adds them in range order. xs: SWISK_SPARSE_ROWS x SWISK_SPARSE_COLS.
template <typename T>
SWISK_FN void sparse_apply_body(SkIdx id, SWISK_CONST SparseParams& p, SWISK_GLOBAL const T* x,
                                SWISK_GLOBAL sk_u32* work, SWISK_GLOBAL T* out, SWISK_TG float* xs) {
  const sk_u32 R = SWISK_SPARSE_ROWS, C = SWISK_SPARSE_COLS, n = p.s.n, k = p.s.k, end = 0x7fffffffu;
  const sk_u32 groups = (p.rows + R - 1u) / R, outs = (k + id.bdx - 1u) / id.bdx;
  SWISK_GLOBAL const sk_u32* sorted = work + sparse_sorted_at(p);
  for (sk_u32 gs = id.by; gs < groups * p.splits; gs += id.gdy)
    for (sk_u32 ob = id.bx; ob < outs; ob += id.gdx) {
      const sk_u32 gr = gs / p.splits, sp = gs % p.splits, b0 = gr * R, nr = p.rows - b0 < R ? p.rows - b0 : R;
      const sk_u32 i = ob * id.bdx + id.tx, ii = i < k ? i : k;  // past k: a row of no words
      const sk_u32 c1 = (sp + 1u) * p.per_split < p.chunks ? (sp + 1u) * p.per_split : p.chunks;
      const sk_u32 col1 = c1 * p.chunk < n ? c1 * p.chunk : n;
      const sk_u32 c_first = sp * p.per_split;
      sk_u32 c = c_first;  // the walk: chunk c, its words q .. q1 of row i, w the one at q
      sk_u32 q = work[sk_u64(c) * (k + 1u) + ii], q1 = i < k ? work[sk_u64(c) * (k + 1u) + i + 1u] : q;
      sk_u32 w = q < q1 ? sorted[sk_u64(c) * p.sort + q] : end;
      float acc[SWISK_SPARSE_ROWS];
      SWISK_UNROLL
      for (sk_u32 r = 0; r < R; ++r) acc[r] = 0.0f;
      for (sk_u32 c0 = c_first * p.chunk; c0 < col1; c0 += C) {
        const sk_u32 tc = col1 - c0 < C ? col1 - c0 : C;
        SWISK_BARRIER();  // the previous tile is consumed
        for (sk_u32 e = id.tx; e < R * C; e += id.bdx)
          if (e % C < tc) xs[e] = e / C < nr ? float(x[sk_u64(b0 + e / C) * n + c0 + e % C]) : 0.0f;
        SWISK_BARRIER();
        for (;;) {
          if (q == q1) {  // the chunk's words are spent: the next chunk's, if the range has one
            if (c + 1u >= c1) break;
            ++c;
            q = work[sk_u64(c) * (k + 1u) + ii], q1 = i < k ? work[sk_u64(c) * (k + 1u) + i + 1u] : q;
            w = q < q1 ? sorted[sk_u64(c) * p.sort + q] : end;
            continue;
          }
          const sk_u32 col = (w & ~SWISK_SPARSE_SIGN) - c0;
          if (col >= tc) break;  // in a later tile
          const sk_u32 next = q + 1u < q1 ? sorted[sk_u64(c) * p.sort + q + 1u] : end;
          const float sign = sparse_sign_of(w);
          SWISK_UNROLL
          for (sk_u32 r = 0; r < R; ++r) acc[r] = sk_fma(sign, xs[r * C + col], acc[r]);
          ++q;
          w = next;
        }
      }
      SWISK_GLOBAL sk_u32* part = work + sparse_part_at(p) + sk_u64(sp) * p.rows * k;
      SWISK_UNROLL
      for (sk_u32 r = 0; r < R; ++r)
        if (i < k && r < nr) {
          if (p.splits == 1u) out[sk_u64(b0 + r) * k + i] = T(acc[r] * p.mult);
          else part[sk_u64(b0 + r) * k + i] = sk_float_bits(acc[r]);
        }
    }
}

// x S^T over several ranges: a thread per output, the ranges' sums added in order, then scaled.
template <typename T>
SWISK_FN void sparse_sum_body(SkIdx id, SWISK_CONST SparseParams& p, SWISK_GLOBAL const sk_u32* work,
                              SWISK_GLOBAL T* out) {
  SWISK_GLOBAL const sk_u32* part = work + sparse_part_at(p);
  const sk_u64 total = sk_u64(p.rows) * p.s.k, stride = sk_u64(id.gdx) * id.bdx;
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < total; e += stride) {
    float sum = sk_bits_float(part[e]);
    for (sk_u32 sp = 1; sp < p.splits; ++sp) sum += sk_bits_float(part[sp * total + e]);
    out[e] = T(sum * p.mult);
  }
}

#endif

// g S: a thread per (group of rows, column j), consecutive threads on consecutive j: column j's nnz words,
// each adding the rows' values at its row.
template <typename T>
SWISK_FN void sparse_apply_t_body(SkIdx id, SWISK_CONST SparseParams& p, SWISK_GLOBAL const T* g,
                                  SWISK_GLOBAL const sk_u32* work, SWISK_GLOBAL T* out) {
  const sk_u32 R = SWISK_SPARSE_ROWS, n = p.s.n, k = p.s.k;
  const sk_u32 groups = (p.rows + R - 1u) / R, blocks = (n + id.bdx - 1u) / id.bdx;
  for (sk_u32 gr = id.by; gr < groups; gr += id.gdy)
    for (sk_u32 jb = id.bx; jb < blocks; jb += id.gdx) {
      const sk_u32 b0 = gr * R, nr = p.rows - b0 < R ? p.rows - b0 : R, j = jb * id.bdx + id.tx;
      if (j >= n) continue;
      float acc[SWISK_SPARSE_ROWS];
      SWISK_UNROLL
      for (sk_u32 r = 0; r < R; ++r) acc[r] = 0.0f;
      for (sk_u32 m = 0; m < p.s.nnz; ++m) {
        const sk_u32 w = work[sk_u64(m) * n + j];
        const float sign = sparse_sign_of(w);
        SWISK_GLOBAL const T* at = g + sk_u64(b0) * k + (w & ~SWISK_SPARSE_SIGN);
        SWISK_UNROLL
        for (sk_u32 r = 0; r < R; ++r)
          if (r < nr) acc[r] = sk_fma(sign, float(at[sk_u64(r) * k]), acc[r]);
      }
      SWISK_UNROLL
      for (sk_u32 r = 0; r < R; ++r)
        if (r < nr) out[sk_u64(b0 + r) * n + j] = T(acc[r] * p.mult);
    }
}


// Grids: the table pass grid-strides over columns, at most 4096 blocks of SWISK_SKETCH_THREADS (for its
// shared rows); a block per chunk for the sort; the products (blocks of outputs, groups of rows): a row
// group's blocks launch together (x fastest), sharing its rows in L2; the ranges' sum grid-strides over outputs.
SWISK_HD SkGrid sparse_grid(sk_u64 items, sk_u32 threads) {
  const sk_u64 blocks = sk_tiles(items, threads);
  return sk_tile_grid(blocks > 4096 ? 4096 : blocks, 1);
}
SWISK_HD SkGrid sparse_sort_grid(SWISK_CONST SparseParams& p) {
  return sk_tile_grid(p.chunks > 4096 ? 4096 : p.chunks, 1);
}
SWISK_HD SkGrid sparse_sum_grid(SWISK_CONST SparseParams& p) {
  return sparse_grid(sk_u64(p.rows) * p.s.k, SWISK_SPARSE_THREADS);
}
SWISK_HD SkGrid sparse_apply_grid(SWISK_CONST SparseParams& p, bool transpose) {
  return transpose ? sk_tile_grid(sk_tiles(p.s.n, SWISK_SPARSE_THREADS), sk_tiles(p.rows, SWISK_SPARSE_ROWS))
                   : sk_tile_grid(sk_tiles(p.s.k, SWISK_SPARSE_THREADS),
                                  sk_u64(p.splits) * sk_tiles(p.rows, SWISK_SPARSE_ROWS));
}
