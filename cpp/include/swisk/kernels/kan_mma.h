// Tensor-core kernels of the fused KAN layer (CUDA fast path; emulated here): the forward for
// fp16/bf16, and fp32 as tf32 when allowed; the weight gradient for fp16/bf16.
// y = A · Wpᵀ with A[n, i·(nb+1)] = silu(x[n,i]), A[n, i·(nb+1)+1+j] = B_j(x[n,i]) and Wp the packed
// [base_weight | spline_weight·spline_scaler] (out, cpad). Tiles of A are built in shared memory inside
// the main loop from x and the knots; A never reaches global memory.
#pragma once

#include "swisk/kernels/kan.h"
#include "swisk/kernels/mma.h"

#define SWISK_KAN_MMA_BM 64    // rows of y per block
#define SWISK_KAN_MMA_BN 64    // outputs per block
#define SWISK_KAN_MMA_BK 32    // packed columns per main-loop step
#define SWISK_KAN_MMA_THREADS 128  // 4 warps, each a 32x32 quarter of the block tile

// Packed columns: in·(n_basis+1) rounded up to a whole main-loop step (64-bit: it can pass 2^32).
SWISK_HD sk_u64 kan_mma_cpad(sk_u32 in, sk_u32 n_basis) {
  return sk_tiles(sk_u64(in) * (n_basis + 1), SWISK_KAN_MMA_BK) * SWISK_KAN_MMA_BK;
}

// Elements of the packed weights wp (out, cpad).
SWISK_HD sk_u64 kan_mma_packed(sk_u32 in, sk_u32 out, sk_u32 n_basis) { return sk_u64(out) * kan_mma_cpad(in, n_basis); }

// Grids (capped; the bodies loop over every tile): forward (row tiles, out tiles), weight gradient
// (column tiles, out tiles).
SWISK_HD SkGrid kan_mma_pack_grid(KanParams p) {  // grid-stride over the packed (out, cpad) weights
  return sk_stride_grid(sk_u64(p.out) * kan_mma_cpad(p.in, p.n_basis));
}
SWISK_HD SkGrid kan_mma_forward_grid(KanParams p) {
  return sk_tile_grid(sk_tiles(p.rows, SWISK_KAN_MMA_BM), sk_tiles(p.out, SWISK_KAN_MMA_BN));
}
SWISK_HD SkGrid kan_mma_backward_w_grid(KanParams p) {
  return sk_tile_grid(sk_tiles(sk_u64(p.in) * (p.n_basis + 1), SWISK_KAN_MMA_BN), sk_tiles(p.out, SWISK_KAN_MMA_BM));
}

// The kernel bodies need block barriers: CUDA and its emulator (not the plain CPU backend).
#if defined(SWISK_BARRIER)

// wp[o, c] (grid-stride over out·cpad); padding columns are zero.
template <typename T>
SWISK_FN void kan_mma_pack_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* bw, SWISK_GLOBAL const T* sw,
                                SWISK_GLOBAL const T* sc, SWISK_GLOBAL T* wp) {
  typedef typename sk_acc<T>::type A;
  const sk_u32 nq = p.n_basis + 1;
  const sk_u64 cpad = kan_mma_cpad(p.in, p.n_basis), total = sk_u64(p.out) * cpad, step = sk_u64(id.bdx) * id.gdx;
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < total; e += step) {
    const sk_u64 o = e / cpad, c = e % cpad;
    const sk_u32 i = sk_u32(c / nq), q = sk_u32(c % nq);
    A v = A(0);
    if (i < p.in) {
      const sk_u64 oi = o * p.in + i;
      if (q == 0) v = p.has_base ? A(bw[oi]) : A(0);
      else v = A(sw[oi * p.n_basis + q - 1]) * (p.has_scaler ? A(sc[oi]) : A(1));
    }
    wp[e] = T(v);
  }
}

// A warp's 32x32 quarter of the block tile (warp w: rows (w/2)·32, columns (w%2)·32) as 2x2 MMA tiles.
template <typename T>
SWISK_FN void kan_mma_warp_zero(SkMmaAcc<T> (&acc)[2][2]) {
  for (sk_u32 a = 0; a < 2; ++a)
    for (sk_u32 b = 0; b < 2; ++b) sk_mma_zero(acc[a][b]);
}

// acc += the quarter of as (row-major, ld BK) times bs (column-major, ld BK) over one BK step.
template <typename T>
SWISK_FN void kan_mma_warp_step(SkMmaAcc<T> (&acc)[2][2], SWISK_TG const T* as, SWISK_TG const T* bs, sk_u32 warp,
                                sk_u32 lane) {
  const sk_u32 BK = SWISK_KAN_MMA_BK, wr = warp / 2, wc = warp % 2;
  for (sk_u32 kk = 0; kk < BK; kk += 16)
    for (sk_u32 a = 0; a < 2; ++a)
      for (sk_u32 b = 0; b < 2; ++b)
        sk_mma(acc[a][b], as + (wr * 32 + a * 16) * BK + kk, BK, bs + (wc * 32 + b * 16) * BK + kk, BK, lane);
}

// The quarter into cs (row-major BM x BN, fp32).
template <typename T>
SWISK_FN void kan_mma_warp_store(SWISK_TG float* cs, SkMmaAcc<T> (&acc)[2][2], sk_u32 warp, sk_u32 lane) {
  const sk_u32 BN = SWISK_KAN_MMA_BN, wr = warp / 2, wc = warp % 2;
  for (sk_u32 a = 0; a < 2; ++a)
    for (sk_u32 b = 0; b < 2; ++b) sk_mma_store(cs + (wr * 32 + a * 16) * BN + wc * 32 + b * 16, BN, acc[a][b], lane);
}

// Writes silu and the non-zero bases of x[n, i] into the columns [c0, c0 + width) of one tile row:
// row[(col - c0) * stride]. A NaN input fills the feature's columns with NaN. The feature's columns
// meet the tile, so its first column relative to c0 (base) is small; the absolute ones are 64-bit.
template <typename T, typename P>
SWISK_FN void kan_mma_scatter(SWISK_TG T* row, sk_u32 stride, sk_u64 c0, sk_i32 width, float xv, P g,
                              SWISK_CONST KanParams& p, sk_u32 i) {
  const sk_i32 M = SWISK_MAX_SPLINE_ORDER, k = sk_i32(p.order), nq = sk_i32(p.n_basis) + 1;
  const sk_i32 base = sk_i32(sk_i64(sk_u64(i) * sk_u64(nq)) - sk_i64(c0));
  BsplineLocal<float> bl = bspline_local<float>(xv, g, sk_i32(p.n_knots), k, false);
  for (sk_i32 q = 0; q < nq && bl.span == -2; ++q)
    if (base + q >= 0 && base + q < width) row[sk_u32(base + q) * stride] = T(bl.v[0]);
  // silu only with a base branch: its zero weight column would make 0·silu(±inf) = NaN
  if (p.has_base && base >= 0 && base < width) row[sk_u32(base) * stride] = T(kan_silu(xv));
  for (sk_i32 rr = 0; rr <= M; ++rr) {
    const sk_i32 j = bl.span - M + rr, col = base + 1 + j;
    if (rr >= M - k && bl.span >= 0 && j >= 0 && j < sk_i32(p.n_basis) && col >= 0 && col < width)
      row[sk_u32(col) * stride] = T(bl.v[rr]);
  }
}

// Stages the operand tile of rows n0.. (nrows of them) and packed columns [c0, c0 + width): zeroed by
// the caller, then silu and the non-zero bases of every (row, feature) pair whose columns meet it,
// at tile[r * row_stride + (c - c0) * col_stride].
template <typename T>
SWISK_FN void kan_mma_stage_basis(SWISK_TG T* tile, sk_u32 row_stride, sk_u32 col_stride, sk_u32 nrows, sk_u32 n0,
                                  sk_u64 c0, sk_u32 width, sk_u32 tid, SWISK_CONST KanParams& p,
                                  SWISK_GLOBAL const T* x, SWISK_GLOBAL const T* grid) {
  const sk_u32 nq = p.n_basis + 1, i_lo = sk_u32(c0 / nq), i_end = sk_u32((c0 + width + nq - 1) / nq);
  const sk_u32 nf = (i_end < p.in ? i_end : p.in) - i_lo;
  for (sk_u32 e = tid; e < nrows * nf; e += SWISK_KAN_MMA_THREADS) {
    const sk_u32 r = e / nf, i = i_lo + e % nf, n = n0 + r;
    if (n < p.rows)
      kan_mma_scatter<T>(tile + r * row_stride, col_stride, c0, sk_i32(width), float(x[sk_u64(n) * p.in + i]),
                         grid + sk_u64(i) * p.n_knots, p, i);
  }
}

// One block per (BM rows, BN outputs) tile; as/bs: BM·BK and BN·BK operand tiles, cs: BM·BN fp32.
template <typename T>
SWISK_FN void kan_mma_forward_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* x,
                                   SWISK_GLOBAL const T* grid, SWISK_GLOBAL const T* wp, SWISK_GLOBAL T* y,
                                   SWISK_TG T* as, SWISK_TG T* bs, SWISK_TG float* cs) {
  const sk_u32 BM = SWISK_KAN_MMA_BM, BN = SWISK_KAN_MMA_BN, BK = SWISK_KAN_MMA_BK, NT = SWISK_KAN_MMA_THREADS;
  const sk_u32 tid = id.tx, lane = tid % 32, warp = tid / 32;
  const sk_u64 cpad = kan_mma_cpad(p.in, p.n_basis);
  const sk_u32 row_tiles = sk_u32(sk_tiles(p.rows, BM)), out_tiles = sk_u32(sk_tiles(p.out, BN));
  for (sk_u32 ot = id.by; ot < out_tiles; ot += id.gdy)     // both tile loops are uniform across the block
  for (sk_u32 rt = id.bx; rt < row_tiles; rt += id.gdx) {
    const sk_u32 n0 = rt * BM, o0 = ot * BN;
    SkMmaAcc<T> acc[2][2];
    kan_mma_warp_zero(acc);
    for (sk_u64 c0 = 0; c0 < cpad; c0 += BK) {
      for (sk_u32 e = tid; e < BM * BK; e += NT) as[e] = T(0.0f);
      for (sk_u32 e = tid; e < BN * BK; e += NT) {  // B column-major: bs[oc·BK + cc]
        const sk_u32 oc = e / BK, cc = e % BK;
        bs[e] = o0 + oc < p.out ? wp[sk_u64(o0 + oc) * cpad + c0 + cc] : T(0.0f);
      }
      SWISK_BARRIER();
      kan_mma_stage_basis<T>(as, BK, 1, BM, n0, c0, BK, tid, p, x, grid);  // row-major A tile
      SWISK_BARRIER();
      kan_mma_warp_step(acc, as, bs, warp, lane);
      SWISK_BARRIER();
    }
    kan_mma_warp_store(cs, acc, warp, lane);
    SWISK_BARRIER();
    for (sk_u32 e = tid; e < BM * BN; e += NT) {
      const sk_u32 r = e / BN, oc = e % BN;
      if (n0 + r < p.rows && o0 + oc < p.out) y[sk_u64(n0 + r) * p.out + o0 + oc] = T(cs[e]);
    }
    SWISK_BARRIER();
  }
}

// Weight gradient dW[o, c] = sum_n gy[n, o] A[n, c] in a fixed order: one block per (BM outputs,
// BN columns) tile, rows in steps of BK. A: as[o·BK + n] = gy tile (transposed); B: bs[c·BK + n] = the
// basis tile. Writes grad_bw (c = i·(nb+1)) and the unscaled spline gradient ws (out, in, nb), as the
// portable kan_backward_w_body does.
template <typename T>
SWISK_FN void kan_mma_backward_w_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* x,
                                      SWISK_GLOBAL const T* grid, SWISK_GLOBAL const T* gy, SWISK_GLOBAL T* gbw,
                                      SWISK_GLOBAL float* ws, SWISK_TG T* as, SWISK_TG T* bs, SWISK_TG float* cs) {
  const sk_u32 BM = SWISK_KAN_MMA_BM, BN = SWISK_KAN_MMA_BN, BK = SWISK_KAN_MMA_BK, NT = SWISK_KAN_MMA_THREADS;
  const sk_u32 tid = id.tx, lane = tid % 32, warp = tid / 32;
  const sk_u32 nq = p.n_basis + 1, out_tiles = sk_u32(sk_tiles(p.out, BM));
  const sk_u64 cols = sk_u64(p.in) * nq, col_tiles = sk_tiles(cols, BN);
  for (sk_u32 ot = id.by; ot < out_tiles; ot += id.gdy)     // both tile loops are uniform across the block
  for (sk_u64 ct = id.bx; ct < col_tiles; ct += id.gdx) {
    const sk_u64 c0 = ct * BN;
    const sk_u32 o0 = ot * BM;
    SkMmaAcc<T> acc[2][2];
    kan_mma_warp_zero(acc);
    for (sk_u32 n0 = 0; n0 < p.rows; n0 += BK) {
      for (sk_u32 e = tid; e < BM * BK; e += NT) {
        const sk_u32 ol = e / BK, nl = e % BK;
        as[e] = o0 + ol < p.out && n0 + nl < p.rows ? gy[sk_u64(n0 + nl) * p.out + o0 + ol] : T(0.0f);
      }
      for (sk_u32 e = tid; e < BN * BK; e += NT) bs[e] = T(0.0f);
      SWISK_BARRIER();
      kan_mma_stage_basis<T>(bs, 1, BK, BK, n0, c0, BN, tid, p, x, grid);  // column-major B tile
      SWISK_BARRIER();
      kan_mma_warp_step(acc, as, bs, warp, lane);
      SWISK_BARRIER();
    }
    kan_mma_warp_store(cs, acc, warp, lane);
    SWISK_BARRIER();
    for (sk_u32 e = tid; e < BM * BN; e += NT) {
      const sk_u32 o = o0 + e / BN;
      const sk_u64 c = c0 + e % BN;
      if (o >= p.out || c >= cols) continue;
      const sk_u32 i = sk_u32(c / nq), q = sk_u32(c % nq);
      if (q == 0) {
        if (p.has_base) gbw[sk_u64(o) * p.in + i] = T(cs[e]);
      } else {
        ws[(sk_u64(o) * p.in + i) * p.n_basis + q - 1] = cs[e];
      }
    }
    SWISK_BARRIER();
  }
}

#endif  // SWISK_BARRIER
