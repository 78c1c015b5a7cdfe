// Fused B-spline KAN linear layer (efficient-kan's math), written once for CUDA and Metal:
//   y[n,o] = sum_i silu(x[n,i]) Wb[o,i] + sum_i sum_j B_j(x[n,i]) sw[o,i,j] sc[o,i]
// The basis tensor is never written to global memory: tiles of it live in shared memory.
#pragma once

#include "swisk/kernels/bspline.h"

#define SWISK_KAN_TILE 16                        // blocks are TILE x TILE threads
#define SWISK_KAN_LOCAL (SWISK_MAX_SPLINE_ORDER + 2)  // silu + order+1 bases per (row, feature)

// Parameters of the KAN kernels (plain data, shared by host, CUDA and Metal).
struct KanParams {
  sk_u32 rows;        // product of x's leading dimensions
  sk_u32 in, out;     // features in and out
  sk_u32 n_knots;     // knots per feature
  sk_u32 order;       // spline order k
  sk_u32 n_basis;     // n_knots - 1 - order
  sk_u32 has_base;    // 0: no base branch (base_weight absent)
  sk_u32 has_scaler;  // 0: spline_scaler absent (taken as 1)
};

// Launch geometry of the tiled kernels (TILE x TILE blocks): grids of (x, y) tiles, capped; the bodies
// loop over every tile in both dimensions.
SWISK_HD SkGrid kan_forward_grid(KanParams p) {  // (row tiles, out tiles)
  return sk_tile_grid(sk_tiles(p.rows, SWISK_KAN_TILE), sk_tiles(p.out, SWISK_KAN_TILE));
}
SWISK_HD SkGrid kan_backward_x_grid(KanParams p) {  // (feature tiles, row tiles)
  return sk_tile_grid(sk_tiles(p.in, SWISK_KAN_TILE), sk_tiles(p.rows, SWISK_KAN_TILE));
}
SWISK_HD SkGrid kan_backward_scale_grid(KanParams p) {  // grid-stride over (out, in)
  return sk_stride_grid(sk_u64(p.out) * p.in);
}
SWISK_HD SkGrid kan_backward_w_grid(KanParams p) {  // (column tiles over in·(n_basis+1), out tiles)
  return sk_tile_grid(sk_tiles(sk_u64(p.in) * (p.n_basis + 1), SWISK_KAN_TILE), sk_tiles(p.out, SWISK_KAN_TILE));
}

template <typename A>
SWISK_FN A kan_silu(A x) { return x / (A(1) + sk_exp(-x)); }

template <typename A>
SWISK_FN A kan_silu_grad(A x) {
  const A s = A(1) / (A(1) + sk_exp(-x));
  return s * (A(1) + x * (A(1) - s));
}

#if defined(SWISK_DIALECT_CPP) && defined(__GNUC__) && !defined(__clang__)
#define SWISK_KAN_UNROLL _Pragma("GCC unroll 16")
#else
#define SWISK_KAN_UNROLL
#endif

// The K+1 bases that can be non-zero at x, for a compile-time order K (the CPU's hot path): v[r] is
// B_{span-K+r}, dv[r] its derivative; span -1 outside the grid, -2 for NaN (v = dv = NaN). The same
// truncated Cox–de Boor recursion as bspline_local, with each level's quotient B_{j,k-1} / (g[j+k] - g[j])
// shared by its two neighbours and taken from inv[(k-1) * n_knots + j] = 1 / (g[j+k] - g[j]); a
// branch-free knot search.
template <int K, typename A, typename P, typename Q>
SWISK_FN sk_i32 bspline_local_k(A x, P g, Q inv, sk_i32 n_knots, SWISK_THREAD A* v, SWISK_THREAD A* dv) {
  for (sk_i32 r = 0; r <= K; ++r) v[r] = dv[r] = A(0);
  if (sk_isnan(x)) {
    for (sk_i32 r = 0; r <= K; ++r) v[r] = dv[r] = x;
    return -2;
  }
  if (!(x >= A(g[0]) && x < A(g[n_knots - 1]))) return -1;
  sk_i32 s = 0;  // last knot <= x: by counting on short grids (independent compares), else by halving
  if (n_knots <= 32) {
    for (sk_i32 t = 1; t < n_knots - 1; ++t) s += x >= A(g[t]) ? 1 : 0;
  } else {
    for (sk_i32 len = n_knots - 1; len > 1;) {
      const sk_i32 half = len / 2;
      s = x >= A(g[s + half]) ? s + half : s;
      len -= half;
    }
  }
  const sk_i32 top = n_knots - 2;  // B_{j,k} exists for 0 <= j <= top - k
  A q[K + 2];
  v[K] = A(1);
  SWISK_KAN_UNROLL
  for (sk_i32 k = 1; k <= K; ++k) {
    SWISK_KAN_UNROLL
    for (sk_i32 r = 0; r <= K + 1; ++r) {
      const sk_i32 j = s - K + r;
      const bool live = r >= K - k + 1 && r <= K && j >= 0 && j <= top - (k - 1);
      q[r] = live ? v[r] * A(inv[(k - 1) * n_knots + j]) : A(0);
    }
    SWISK_KAN_UNROLL
    for (sk_i32 r = K - k; r <= K; ++r) {
      const sk_i32 j = s - K + r;
      v[r] = (j >= 0 && j <= top - k) ? (x - A(g[j])) * q[r] + (A(g[j + k + 1]) - x) * q[r + 1] : A(0);
      if (k == K) dv[r] = (j >= 0 && j <= top - k) ? A(K) * (q[r] - q[r + 1]) : A(0);
    }
  }
  return s;
}

// The tiled bodies need block barriers: GPU dialects and the emulators (not the plain CPU backend).
#if defined(SWISK_BARRIER)

// ---- forward: one thread per y[n,o]; block = TILE rows x TILE outputs ------------------------------
// Per in-chunk of TILE features the block stages silu and the order+1 local bases of its
// (rows x features) tile in shared memory (sv: TILE*TILE*LOCAL values, ss: TILE*TILE spans). A thread
// reads all n_basis weights of each (o, i): those outside x's window multiply a zero basis in the
// formulation, which is NaN where the scaled weight is inf or NaN (0·inf); so no scan and fix passes
// (GPUs take this kernel for small layers alone, where launches cost more than the weights' reads).
template <typename T>
SWISK_FN void kan_forward_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* x, SWISK_GLOBAL const T* grid,
                               SWISK_GLOBAL const T* bw, SWISK_GLOBAL const T* sw, SWISK_GLOBAL const T* sc,
                               SWISK_GLOBAL T* y, SWISK_TG float* sv, SWISK_TG sk_i32* ss) {
  typedef typename sk_acc<T>::type A;
  const sk_u32 TL = SWISK_KAN_TILE, L = SWISK_KAN_LOCAL, M = SWISK_MAX_SPLINE_ORDER;
  const sk_u32 k = p.order, nb = p.n_basis;
  const sk_u32 row_tiles = sk_u32(sk_tiles(p.rows, TL)), out_tiles = sk_u32(sk_tiles(p.out, TL));
  for (sk_u32 ot = id.by; ot < out_tiles; ot += id.gdy)     // both tile loops are uniform across the block
  for (sk_u32 rt = id.bx; rt < row_tiles; rt += id.gdx) {
    const sk_u32 n0 = rt * TL, o = ot * TL + id.ty;
    A acc = A(0);
    bool zero_inf = false;  // a non-finite scaled weight met a zero basis
    for (sk_u32 i0 = 0; i0 < p.in; i0 += TL) {
      {  // stage (row n0+ty, feature i0+tx)
        const sk_u32 n = n0 + id.ty, i = i0 + id.tx, e = id.ty * TL + id.tx;
        sk_i32 span = -1;
        sv[e * L] = 0.0f;
        if (n < p.rows && i < p.in) {
          const A xv = A(x[sk_u64(n) * p.in + i]);
          BsplineLocal<A> b = bspline_local<A>(xv, grid + sk_u64(i) * p.n_knots, sk_i32(p.n_knots), sk_i32(k), false);
          span = b.span;
          sv[e * L] = float(kan_silu(xv));
          for (sk_u32 r = 0; r <= M; ++r)
            if (r >= M - k) sv[e * L + 1 + r - (M - k)] = float(b.v[r]);
        }
        ss[e] = span;
      }
      SWISK_BARRIER();
      const sk_u32 n = n0 + id.tx;
      if (n < p.rows && o < p.out) {
        for (sk_u32 f = 0; f < TL && i0 + f < p.in; ++f) {
          const sk_u32 i = i0 + f, e = id.tx * TL + f;
          const sk_u64 oi = sk_u64(o) * p.in + i;
          if (p.has_base) acc += A(sv[e * L]) * A(bw[oi]);
          const sk_i32 span = ss[e];
          if (span == -2) {  // NaN input: NaN out
            acc += A(sv[e * L + 1]);
            continue;
          }
          const A scale = p.has_scaler ? A(sc[oi]) : A(1);
          A s = A(0);
          for (sk_u32 j = 0; j < nb; ++j) {  // r: j's place in the window of bases s-k .. s (span -1: none)
            const A w = A(sw[oi * nb + j]);
            const sk_i32 r = sk_i32(j) - span + sk_i32(k);
            if (span >= 0 && r >= 0 && r <= sk_i32(k)) {
              s += A(sv[e * L + 1 + r]) * w;
            } else {
              const A ws = w * scale;
              zero_inf = zero_inf || sk_isnan(ws) || sk_isinf(ws);
            }
          }
          acc += p.has_scaler ? s * scale : s;
        }
      }
      SWISK_BARRIER();
    }
    if (zero_inf) acc = sk_nan(acc);
    if (n0 + id.tx < p.rows && o < p.out) y[sk_u64(n0 + id.tx) * p.out + o] = T(acc);
  }
}

// ---- backward, dx: one thread per (n,i); block = TILE rows x TILE features --------------------------
// dx = silu'(x) sum_o gy Wb + sum_j dB_j/dx sum_o gy sw sc, gy tiles staged in shared memory (gt: TILE*TILE).
template <typename T>
SWISK_FN void kan_backward_x_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* x,
                                  SWISK_GLOBAL const T* grid, SWISK_GLOBAL const T* bw, SWISK_GLOBAL const T* sw,
                                  SWISK_GLOBAL const T* sc, SWISK_GLOBAL const T* gy, SWISK_GLOBAL T* gx,
                                  SWISK_TG float* gt) {
  typedef typename sk_acc<T>::type A;
  const sk_u32 TL = SWISK_KAN_TILE, M = SWISK_MAX_SPLINE_ORDER;
  const sk_u32 k = p.order, nb = p.n_basis;
  const sk_u32 row_tiles = sk_u32(sk_tiles(p.rows, TL)), in_tiles = sk_u32(sk_tiles(p.in, TL));
  for (sk_u32 it = id.bx; it < in_tiles; it += id.gdx)      // both tile loops are uniform across the block
  for (sk_u32 rt = id.by; rt < row_tiles; rt += id.gdy) {
    const sk_u32 n = rt * TL + id.ty, i = it * TL + id.tx;
    const bool live = n < p.rows && i < p.in;
    BsplineLocal<A> b;
    b.span = -1;
    A xv = A(0);
    if (live) {
      xv = A(x[sk_u64(n) * p.in + i]);
      b = bspline_local<A>(xv, grid + sk_u64(i) * p.n_knots, sk_i32(p.n_knots), sk_i32(k), true);
    }
    const A ds = kan_silu_grad(xv);
    A acc = b.span == -2 ? b.d[0] : A(0);
    for (sk_u32 o0 = 0; o0 < p.out; o0 += TL) {
      const sk_u32 on = o0 + id.tx;
      gt[id.ty * TL + id.tx] = n < p.rows && on < p.out ? float(gy[sk_u64(n) * p.out + on]) : 0.0f;
      SWISK_BARRIER();
      for (sk_u32 f = 0; live && f < TL && o0 + f < p.out; ++f) {
        const sk_u64 oi = sk_u64(o0 + f) * p.in + i;
        const A g = A(gt[id.ty * TL + f]);
        A w = p.has_base ? ds * A(bw[oi]) : A(0);
        if (b.span >= 0) {
          A s = A(0);
          for (sk_u32 r = M - k; r <= M; ++r) {
            const sk_i32 j = b.span - sk_i32(M) + sk_i32(r);
            if (j >= 0 && j < sk_i32(nb)) s += b.d[r] * A(sw[oi * nb + sk_u32(j)]);
          }
          w += p.has_scaler ? s * A(sc[oi]) : s;
        }
        acc += g * w;
      }
      SWISK_BARRIER();
    }
    if (live) gx[sk_u64(n) * p.in + i] = T(acc);
  }
}

// ---- backward, weights: dW[o, c] = sum_n gy[n,o] A[n,c] over the flattened columns c = i*(nb+1)+q,
// A[n, i*(nb+1)] = silu(x[n,i]) and A[n, i*(nb+1)+1+j] = B_j(x[n,i]), rows reduced in a fixed order.
// One thread per (o, c); block = TILE columns x TILE outputs; A and gy tiles staged (at, gt).
// Writes grad_bw (q = 0, when has_base) and the unscaled spline gradient into ws (out, in, nb), fp32.
template <typename T>
SWISK_FN void kan_backward_w_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* x,
                                  SWISK_GLOBAL const T* grid, SWISK_GLOBAL const T* gy, SWISK_GLOBAL T* gbw,
                                  SWISK_GLOBAL float* ws, SWISK_TG float* at, SWISK_TG float* gt) {
  typedef typename sk_acc<T>::type A;
  const sk_u32 TL = SWISK_KAN_TILE;
  const sk_u32 nq = p.n_basis + 1, out_tiles = sk_u32(sk_tiles(p.out, TL));
  const sk_u64 cols = sk_u64(p.in) * nq, col_tiles = sk_tiles(cols, TL);
  for (sk_u32 ot = id.by; ot < out_tiles; ot += id.gdy)     // both tile loops are uniform across the block
  for (sk_u64 ct = id.bx; ct < col_tiles; ct += id.gdx) {
    const sk_u64 c = ct * TL + id.tx;
    const sk_u32 o = ot * TL + id.ty, og = ot * TL + id.tx;
    const sk_u32 ci = sk_u32(c / nq), cq = sk_u32(c % nq);  // the column this thread stages: (feature, slot)
    A acc = A(0);
    for (sk_u32 n0 = 0; n0 < p.rows; n0 += TL) {
      const sk_u32 n = n0 + id.ty;
      float a = 0.0f;
      if (n < p.rows && c < cols) {
        const A xv = A(x[sk_u64(n) * p.in + ci]);
        if (cq == 0) {
          a = float(kan_silu(xv));
        } else {
          BsplineLocal<A> b =
              bspline_local<A>(xv, grid + sk_u64(ci) * p.n_knots, sk_i32(p.n_knots), sk_i32(p.order), false);
          a = float(bspline_pick<A>(b.v, b.span, sk_i32(cq) - 1));
        }
      }
      at[id.ty * TL + id.tx] = a;
      gt[id.ty * TL + id.tx] = n < p.rows && og < p.out ? float(gy[sk_u64(n) * p.out + og]) : 0.0f;
      SWISK_BARRIER();
      for (sk_u32 r = 0; r < TL; ++r) acc += A(gt[r * TL + id.ty]) * A(at[r * TL + id.tx]);
      SWISK_BARRIER();
    }
    if (c < cols && o < p.out) {
      if (cq == 0) {
        if (p.has_base) gbw[sk_u64(o) * p.in + ci] = T(acc);
      } else {
        ws[(sk_u64(o) * p.in + ci) * p.n_basis + cq - 1] = float(acc);
      }
    }
  }
}

// ---- backward, spline weights and scaler from ws: one thread per (o,i), grid-stride -----------------
template <typename T>
SWISK_FN void kan_backward_scale_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* sw,
                                      SWISK_GLOBAL const T* sc, SWISK_GLOBAL const float* ws, SWISK_GLOBAL T* gsw,
                                      SWISK_GLOBAL T* gsc) {
  typedef typename sk_acc<T>::type A;
  const sk_u64 total = sk_u64(p.out) * p.in;
  const sk_u64 step = sk_u64(id.bdx) * id.gdx;
  for (sk_u64 oi = sk_u64(id.bx) * id.bdx + id.tx; oi < total; oi += step) {
    const A s = p.has_scaler ? A(sc[oi]) : A(1);
    A d = A(0);
    for (sk_u32 j = 0; j < p.n_basis; ++j) {
      const A g = A(ws[oi * p.n_basis + j]);
      d += g * A(sw[oi * p.n_basis + j]);
      gsw[oi * p.n_basis + j] = T(g * s);
    }
    if (p.has_scaler) gsc[oi] = T(d);
  }
}

#endif  // SWISK_BARRIER

// ---- non-finite spline weights ---------------------------------------------------------------
// The formulation multiplies every basis, zero or not, by every scaled weight: a non-finite
// sw[o,i,j]·sc[o,i] outside the bases the kernels visit for x[n,i] (j in [span-k, span]) makes
// y[n,o] NaN (0·inf). For the forwards that visit the window alone (the CPU's, CUDA's tensor-core
// one; kan_forward_body checks every weight itself) the scan finds, per (o, i), the first and last such
// j (nb, -1 when none) and per o whether any; the fix then marks those outputs, in every row, as the
// formulation does.
// Scratch: jr (out·in·2) then bad (out), 32-bit words.
SWISK_HD sk_u64 kan_nonfinite_words(KanParams p) { return sk_u64(p.out) * p.in * 2 + p.out; }
SWISK_HD SkGrid kan_nonfinite_scan_grid(KanParams p) { return sk_stride_grid(p.out); }
SWISK_HD SkGrid kan_nonfinite_fix_grid(KanParams p) { return sk_stride_grid(sk_u64(p.rows) * p.out); }

template <typename T>
SWISK_FN void kan_nonfinite_scan_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* sw,
                                      SWISK_GLOBAL const T* sc, SWISK_GLOBAL sk_i32* jr, SWISK_GLOBAL sk_i32* bad) {
  typedef typename sk_acc<T>::type A;
  const sk_u32 nb = p.n_basis;
  for (sk_u64 o = sk_u64(id.bx) * id.bdx + id.tx; o < p.out; o += sk_u64(id.bdx) * id.gdx) {
    sk_i32 any = 0;
    for (sk_u32 i = 0; i < p.in; ++i) {
      const sk_u64 oi = o * p.in + i;
      const A s = p.has_scaler ? A(sc[oi]) : A(1);
      sk_i32 lo = sk_i32(nb), hi = -1;
      for (sk_u32 j = 0; j < nb; ++j) {
        const A w = A(sw[oi * nb + j]) * s;
        if (sk_isnan(w) || sk_isinf(w)) {
          lo = lo < sk_i32(j) ? lo : sk_i32(j);
          hi = sk_i32(j);
        }
      }
      jr[2 * oi] = lo;
      jr[2 * oi + 1] = hi;
      any |= hi >= 0 ? 1 : 0;
    }
    bad[o] = any;
  }
}

// Grid-stride over (row, output); nothing to do where bad[o] is 0 (the usual case: one load).
template <typename T>
SWISK_FN void kan_nonfinite_fix_body(SkIdx id, SWISK_CONST KanParams& p, SWISK_GLOBAL const T* x,
                                     SWISK_GLOBAL const T* grid, SWISK_GLOBAL const sk_i32* jr,
                                     SWISK_GLOBAL const sk_i32* bad, SWISK_GLOBAL T* y) {
  typedef typename sk_acc<T>::type A;
  const sk_u64 total = sk_u64(p.rows) * p.out;
  const sk_i32 k = sk_i32(p.order), nk = sk_i32(p.n_knots);
  for (sk_u64 e = sk_u64(id.bx) * id.bdx + id.tx; e < total; e += sk_u64(id.bdx) * id.gdx) {
    const sk_u64 n = e / p.out, o = e % p.out;
    if (bad[o] == 0) continue;
    bool nan = false;
    for (sk_u32 i = 0; i < p.in && !nan; ++i) {
      const sk_u64 oi = o * p.in + i;
      const sk_i32 lo = jr[2 * oi], hi = jr[2 * oi + 1];
      if (hi < 0) continue;
      const A xv = A(x[n * p.in + i]);
      SWISK_GLOBAL const T* g = grid + sk_u64(i) * p.n_knots;
      sk_i32 span = -1;  // g[span] <= x < g[span + 1]; -1 outside the grid (no basis visited)
      if (xv >= A(g[0]) && xv < A(g[nk - 1])) {
        sk_i32 a = 0, b = nk - 1;
        while (b - a > 1) {
          const sk_i32 m = (a + b) / 2;
          if (xv >= A(g[m])) a = m; else b = m;
        }
        span = a;
      }
      nan = span < 0 || lo < span - k || hi > span;
    }
    if (nan) y[e] = T(sk_nan(0.0f));
  }
}
