// Wavelet KAN math, written once for the CPU backend, CUDA and Metal:
//   y[n,o] = sum_i w[o,i] * psi((x[n,i] - T[o,i]) / S[o,i]), psi one of Wav-KAN's mother wavelets.
// The (batch, out, in) tensor is never formed: every body reduces in registers.
#pragma once

#include "swisk/kernels/dialect.h"

// The wavelets as (id, name), ids 0, 1, ... in order. Every table is generated from this list: the
// names the frontend accepts (and Python's), the kernels' dispatch, the Metal instantiations and the
// emulator's thunks. Adding a wavelet: a line here, its math in wavelet_eval, the reference, tests.
#define SWISK_WAVELETS(X) X(0, mexican_hat) X(1, morlet) X(2, dog) X(3, meyer) X(4, shannon)

#define SK_WAV_ENUM(id, name) SK_WAV_##name = id,
enum SkWavelet { SWISK_WAVELETS(SK_WAV_ENUM) };
#undef SK_WAV_ENUM
#define SK_WAV_PLUS_ONE(id, name) +1
#define SWISK_NUM_WAVELETS (0 SWISK_WAVELETS(SK_WAV_PLUS_ONE))

// GPU code is fp32 only: float literals (a double one would make nvcc emit F2F/DMUL); the host keeps
// full precision for fp64.
#if defined(__METAL_VERSION__) || defined(SWISK_DIALECT_CUDA)
#define SK_WC(v) (v##f)
#else
#define SK_WC(v) (v)
#endif

// Inlined into the CPU backend's lane loops (which then vectorise); the GPUs inline anyway.
#if defined(SWISK_DIALECT_CPP) && defined(__GNUC__)
#define SK_WAV_FN inline __attribute__((always_inline))
#else
#define SK_WAV_FN SWISK_FN
#endif

struct WaveletParams {
  sk_u32 rows;     // product of x's leading dimensions
  sk_u32 in;       // features in
  sk_u32 out;      // features out
  sk_u32 wavelet;  // an id of SWISK_WAVELETS
};

template <typename A>
struct WavVal {
  A v;  // psi(t)
  A d;  // psi'(t) (when asked for)
};

// The math the GPUs use: hardware exp2 / sin / cos (the CPU backend brings vectorisable ones).
struct SkDeviceMath {
  static SWISK_FN float gauss(float t2) { return sk_exp2(t2 * SK_WC(-0.7213475204444817)); }  // e^(-t2/2)
  static SWISK_FN float sin(float x) { return sk_sin(x); }
  static SWISK_FN float cos(float x) { return sk_cos(x); }
  static SWISK_FN float sinpi(float x) { return sk_sinpi(x); }
  static SWISK_FN float cospi(float x) { return sk_cospi(x); }
  static SWISK_FN float cos_near(float x) { return sk_cos(x); }  // cos where |x| <= 128 matters
};

// psi(t) and, when D, psi'(t), exactly as Wav-KAN defines them. Branch-free (selects only), so a
// CPU loop over lanes vectorises. Derivatives at the kinks follow torch's: meyer'(0) = 0.
template <int K, bool D, class M, typename A>
SK_WAV_FN WavVal<A> wavelet_eval(A t) {
  WavVal<A> r;
  r.d = A(0);
  const A t2 = t * t;
  if (K == SK_WAV_mexican_hat) {
    const A c = A(SK_WC(0.8673250705840776));  // 2 / (sqrt(3) pi^(1/4))
    const A g = M::gauss(t2);
    r.v = c * (t2 - A(1)) * g;
    if (D) r.d = c * (t * g) * (A(3) - t2);  // g first: far out t (3 - t^2) overflows where g is 0
  } else if (K == SK_WAV_morlet) {
    const A g = M::gauss(t2);
    const A c5 = D ? M::cos(A(5) * t) : M::cos_near(A(5) * t);  // past |5t| = 66, g is 0
    r.v = c5 * g;
    if (D) r.d = (A(-5) * M::sin(A(5) * t) - t * c5) * g;
  } else if (K == SK_WAV_dog) {
    const A g = M::gauss(t2);
    r.v = -t * g;
    if (D) r.d = (t * g) * t - g;  // g first: far out t^2 overflows where g is 0
  } else if (K == SK_WAV_meyer) {
    // sin(pi v) aux(v), v = |t|; aux = cos(pi/2 nu(2v - 1)) on (1/2, 1), 1 below, 0 above
    const A v = sk_abs(t) >= A(1) ? A(1) : sk_abs(t);  // aux is 0 from 1 on; sin(pi v) at v = inf is NaN
    const A u = A(2) * v - A(1);
    const A u2 = u * u;
    const A nu = u2 * u2 * (A(35) + u * (A(-84) + u * (A(70) - A(20) * u)));
    const A cmid = M::cospi(A(SK_WC(0.5)) * nu);  // every arm is computed, then selected (vectorises)
    const A aux = v <= A(SK_WC(0.5)) ? A(1) : (v >= A(1) ? A(0) : cmid);
    const A s = M::sinpi(v);
    r.v = s * aux;
    if (D) {
      const A um = A(1) - u;
      const A dnu = A(140) * u2 * u * um * um * um;  // nu'(u)
      const A dmid = -M::sinpi(A(SK_WC(0.5)) * nu) * A(SK_WC(3.141592653589793)) * dnu;
      // d aux / dv; dnu is 0 at v = 1, so one compare suffices (with `&& v < 1` GCC 12 left the CPU
      // backward's lane loop scalar, 25x slower: it vectorises no select of one mask by another)
      const A daux = v > A(SK_WC(0.5)) ? dmid : A(0);
      const A sgn = t > A(0) ? A(1) : (t < A(0) ? A(-1) : A(0));
      r.d = sgn * (A(SK_WC(3.141592653589793)) * M::cospi(v) * aux + s * daux);
    }
  } else if (K == SK_WAV_shannon) {
    // sin(t) / t, 1 at 0; the derivative by its series near 0, where (t cos t - sin t) / t^2 cancels
    const A s = M::sin(t);
    const A q = s / t;
    r.v = t == A(0) ? A(1) : q;
    if (D) {
      const A series =
          t * (A(SK_WC(-0.3333333333333333)) +
               t2 * (A(SK_WC(0.03333333333333333)) +
                     t2 * (A(SK_WC(-0.0011904761904761906)) +
                           t2 * (A(SK_WC(2.2045855379188714e-05)) +
                                 t2 * (A(SK_WC(-2.505210838544172e-07)) + t2 * A(SK_WC(1.9270852604185937e-09)))))));
      const A direct = (t * M::cos(t) - s) / t2;
      r.d = sk_abs(t) < A(SK_WC(0.5)) ? series : direct;
    }
  }
  return r;
}

// ---- GPU kernel bodies ---------------------------------------------------------------------------
// 256 threads per block; a block owns a 64 x 64 output tile, each thread a 4 x 4 register micro-tile
// (rows ty + 16a, columns tx + 16b). The reduced dimension is staged through shared memory in chunks
// of KC, transposed ([k][row], pitch 65: no bank conflicts), and reduced in a fixed order.
#define SWISK_WAV_TILE 64
#define SWISK_WAV_KC 16
#define SWISK_WAV_PITCH 65
#define SWISK_WAV_THREADS 256
#define SWISK_WAV_SHARED (SWISK_WAV_KC * SWISK_WAV_PITCH)

// Tile counts, used by the kernels and by the hosts that size their grids.
#if defined(SWISK_DIALECT_CUDA)
#define SK_WAV_HD __host__ __device__ inline
#else
#define SK_WAV_HD SWISK_FN
#endif
SK_WAV_HD sk_u32 wav_tiles(sk_u32 n) { return (n + SWISK_WAV_TILE - 1) / SWISK_WAV_TILE; }

// Tiles of the forward: (batch / 64) x (out / 64), over a 1-D grid (grid-stride).
SK_WAV_HD sk_u64 wav_fwd_tiles(SWISK_CONST WaveletParams& p) { return sk_u64(wav_tiles(p.rows)) * wav_tiles(p.out); }
// Tiles of the backward: the (out x in) parameter tiles first, then the (batch x in) dx tiles.
SK_WAV_HD sk_u64 wav_bwd_tiles(SWISK_CONST WaveletParams& p) {
  return (sk_u64(wav_tiles(p.out)) + wav_tiles(p.rows)) * wav_tiles(p.in);
}
// Launch geometry: one block of SWISK_WAV_THREADS per tile (the bodies stride over tiles past the cap).
SK_WAV_HD SkGrid wav_fwd_grid(SWISK_CONST WaveletParams& p) { return sk_tile_grid(wav_fwd_tiles(p), 1); }
SK_WAV_HD SkGrid wav_bwd_grid(SWISK_CONST WaveletParams& p) { return sk_tile_grid(wav_bwd_tiles(p), 1); }

#if defined(SWISK_BARRIER)  // the bodies below need shared memory and barriers (not the CPU backend)

// dst[k][row] = src[(r0 + row) * rs + (c0 + k) * cs] (or its reciprocal), `pad` outside the tensor.
// k_fast: consecutive threads walk k (src contiguous along k), else along row.
template <typename T>
SWISK_FN void wav_stage(SWISK_TG float* dst, SWISK_GLOBAL const T* src, sk_u32 tid, sk_u32 r0, sk_u32 nr, sk_u64 rs,
                        sk_u32 c0, sk_u32 nc, sk_u64 cs, bool k_fast, float pad, bool recip) {
  for (sk_u32 j = 0; j < SWISK_WAV_TILE * SWISK_WAV_KC / SWISK_WAV_THREADS; ++j) {
    const sk_u32 e = tid + j * SWISK_WAV_THREADS;
    const sk_u32 row = k_fast ? e / SWISK_WAV_KC : e % SWISK_WAV_TILE;
    const sk_u32 k = k_fast ? e % SWISK_WAV_KC : e / SWISK_WAV_TILE;
    float v = pad;
    if (sk_u64(r0) + row < nr && sk_u64(c0) + k < nc) {
      v = float(src[(sk_u64(r0) + row) * rs + (sk_u64(c0) + k) * cs]);
      if (recip) v = 1.0f / v;  // a zero scale gives inf, and the math gives inf / NaN
    }
    dst[k * SWISK_WAV_PITCH + row] = v;
  }
}

// Forward tile: y[n0.., o0..] reduced over in.
template <int K, typename T>
SWISK_FN void wav_fwd_tile(sk_u32 tid, SWISK_CONST WaveletParams& p, SWISK_GLOBAL const T* x,
                           SWISK_GLOBAL const T* scale, SWISK_GLOBAL const T* trans, SWISK_GLOBAL const T* weight,
                           SWISK_GLOBAL T* y, sk_u32 n0, sk_u32 o0, SWISK_TG float* xs, SWISK_TG float* ts,
                           SWISK_TG float* rs, SWISK_TG float* ws) {
  const sk_u32 tx = tid % 16, ty = tid / 16;
  float acc[4][4];
  SWISK_UNROLL for (int a = 0; a < 4; ++a)
    SWISK_UNROLL for (int b = 0; b < 4; ++b) acc[a][b] = 0.0f;
  for (sk_u32 i0 = 0; i0 < p.in; i0 += SWISK_WAV_KC) {
    wav_stage<T>(xs, x, tid, n0, p.rows, p.in, i0, p.in, 1, true, 0.0f, false);
    wav_stage<T>(ts, trans, tid, o0, p.out, p.in, i0, p.in, 1, true, 0.0f, false);
    wav_stage<T>(rs, scale, tid, o0, p.out, p.in, i0, p.in, 1, true, 1.0f, true);
    wav_stage<T>(ws, weight, tid, o0, p.out, p.in, i0, p.in, 1, true, 0.0f, false);
    SWISK_BARRIER();
    for (int k = 0; k < SWISK_WAV_KC; ++k) {
      float xv[4], tv[4], rv[4], wv[4];
      SWISK_UNROLL for (int a = 0; a < 4; ++a) xv[a] = xs[k * SWISK_WAV_PITCH + ty + 16 * a];
      SWISK_UNROLL for (int b = 0; b < 4; ++b) {
        tv[b] = ts[k * SWISK_WAV_PITCH + tx + 16 * b];
        rv[b] = rs[k * SWISK_WAV_PITCH + tx + 16 * b];
        wv[b] = ws[k * SWISK_WAV_PITCH + tx + 16 * b];
      }
      SWISK_UNROLL for (int a = 0; a < 4; ++a)
        SWISK_UNROLL for (int b = 0; b < 4; ++b)
          acc[a][b] += wv[b] * wavelet_eval<K, false, SkDeviceMath>((xv[a] - tv[b]) * rv[b]).v;
    }
    SWISK_BARRIER();
  }
  SWISK_UNROLL for (int a = 0; a < 4; ++a)
    SWISK_UNROLL for (int b = 0; b < 4; ++b) {
      const sk_u32 n = n0 + ty + 16 * a, o = o0 + tx + 16 * b;
      if (n < p.rows && o < p.out) y[sk_u64(n) * p.out + o] = T(acc[a][b]);
    }
}

// dx tile: dx[n0.., i0..] = sum_o g[n,o] w[o,i] / S[o,i] psi'(t), reduced over out.
template <int K, typename T>
SWISK_FN void wav_bwd_x_tile(sk_u32 tid, SWISK_CONST WaveletParams& p, SWISK_GLOBAL const T* x,
                             SWISK_GLOBAL const T* scale, SWISK_GLOBAL const T* trans, SWISK_GLOBAL const T* weight,
                             SWISK_GLOBAL const T* g, SWISK_GLOBAL T* dx, sk_u32 n0, sk_u32 i0, SWISK_TG float* gs,
                             SWISK_TG float* ts, SWISK_TG float* rs, SWISK_TG float* ws) {
  const sk_u32 tx = tid % 16, ty = tid / 16;
  float acc[4][4], xv[4][4];
  SWISK_UNROLL for (int a = 0; a < 4; ++a)
    SWISK_UNROLL for (int b = 0; b < 4; ++b) {
      const sk_u32 n = n0 + ty + 16 * a, i = i0 + tx + 16 * b;
      acc[a][b] = 0.0f;
      xv[a][b] = n < p.rows && i < p.in ? float(x[sk_u64(n) * p.in + i]) : 0.0f;
    }
  for (sk_u32 o0 = 0; o0 < p.out; o0 += SWISK_WAV_KC) {
    wav_stage<T>(gs, g, tid, n0, p.rows, p.out, o0, p.out, 1, true, 0.0f, false);
    wav_stage<T>(ts, trans, tid, i0, p.in, 1, o0, p.out, p.in, false, 0.0f, false);
    wav_stage<T>(rs, scale, tid, i0, p.in, 1, o0, p.out, p.in, false, 1.0f, true);
    wav_stage<T>(ws, weight, tid, i0, p.in, 1, o0, p.out, p.in, false, 0.0f, false);
    SWISK_BARRIER();
    for (int k = 0; k < SWISK_WAV_KC; ++k) {
      float gv[4], tv[4], rv[4], wr[4];
      SWISK_UNROLL for (int a = 0; a < 4; ++a) gv[a] = gs[k * SWISK_WAV_PITCH + ty + 16 * a];
      SWISK_UNROLL for (int b = 0; b < 4; ++b) {
        tv[b] = ts[k * SWISK_WAV_PITCH + tx + 16 * b];
        rv[b] = rs[k * SWISK_WAV_PITCH + tx + 16 * b];
        wr[b] = ws[k * SWISK_WAV_PITCH + tx + 16 * b] * rv[b];
      }
      SWISK_UNROLL for (int a = 0; a < 4; ++a)
        SWISK_UNROLL for (int b = 0; b < 4; ++b)
          acc[a][b] += gv[a] * wr[b] * wavelet_eval<K, true, SkDeviceMath>((xv[a][b] - tv[b]) * rv[b]).d;
    }
    SWISK_BARRIER();
  }
  SWISK_UNROLL for (int a = 0; a < 4; ++a)
    SWISK_UNROLL for (int b = 0; b < 4; ++b) {
      const sk_u32 n = n0 + ty + 16 * a, i = i0 + tx + 16 * b;
      if (n < p.rows && i < p.in) dx[sk_u64(n) * p.in + i] = T(acc[a][b]);
    }
}

// Parameter tile (o0.., i0..), reduced over the batch. With A1 = sum_n g psi, A2 = sum_n g psi',
// A3 = sum_n g psi' t: dweight = A1, dtranslation = -w/S A2, dscale = -w/S A3.
template <int K, typename T>
SWISK_FN void wav_bwd_params_tile(sk_u32 tid, SWISK_CONST WaveletParams& p, SWISK_GLOBAL const T* x,
                                  SWISK_GLOBAL const T* scale, SWISK_GLOBAL const T* trans,
                                  SWISK_GLOBAL const T* weight, SWISK_GLOBAL const T* g, SWISK_GLOBAL T* dscale,
                                  SWISK_GLOBAL T* dtrans, SWISK_GLOBAL T* dweight, sk_u32 o0, sk_u32 i0,
                                  SWISK_TG float* gs, SWISK_TG float* xs) {
  const sk_u32 tx = tid % 16, ty = tid / 16;
  float tr[4][4], rc[4][4], a1[4][4], a2[4][4], a3[4][4];
  SWISK_UNROLL for (int a = 0; a < 4; ++a)
    SWISK_UNROLL for (int b = 0; b < 4; ++b) {
      const sk_u32 o = o0 + ty + 16 * a, i = i0 + tx + 16 * b;
      const bool inside = o < p.out && i < p.in;
      tr[a][b] = inside ? float(trans[sk_u64(o) * p.in + i]) : 0.0f;
      rc[a][b] = inside ? 1.0f / float(scale[sk_u64(o) * p.in + i]) : 1.0f;
      a1[a][b] = 0.0f;
      a2[a][b] = 0.0f;
      a3[a][b] = 0.0f;
    }
  for (sk_u32 m0 = 0; m0 < p.rows; m0 += SWISK_WAV_KC) {
    wav_stage<T>(gs, g, tid, o0, p.out, 1, m0, p.rows, p.out, false, 0.0f, false);
    wav_stage<T>(xs, x, tid, i0, p.in, 1, m0, p.rows, p.in, false, 0.0f, false);
    SWISK_BARRIER();
    for (int k = 0; k < SWISK_WAV_KC; ++k) {
      float gv[4], xv[4];
      SWISK_UNROLL for (int a = 0; a < 4; ++a) gv[a] = gs[k * SWISK_WAV_PITCH + ty + 16 * a];
      SWISK_UNROLL for (int b = 0; b < 4; ++b) xv[b] = xs[k * SWISK_WAV_PITCH + tx + 16 * b];
      SWISK_UNROLL for (int a = 0; a < 4; ++a)
        SWISK_UNROLL for (int b = 0; b < 4; ++b) {
          const float t = (xv[b] - tr[a][b]) * rc[a][b];
          const WavVal<float> w = wavelet_eval<K, true, SkDeviceMath>(t);
          const float gd = gv[a] * w.d;
          a1[a][b] += gv[a] * w.v;
          a2[a][b] += gd;
          a3[a][b] += gd * t;
        }
    }
    SWISK_BARRIER();
  }
  SWISK_UNROLL for (int a = 0; a < 4; ++a)
    SWISK_UNROLL for (int b = 0; b < 4; ++b) {
      const sk_u32 o = o0 + ty + 16 * a, i = i0 + tx + 16 * b;
      if (o >= p.out || i >= p.in) continue;
      const sk_u64 e = sk_u64(o) * p.in + i;
      const float wr = float(weight[e]) * rc[a][b];
      dweight[e] = T(a1[a][b]);
      dtrans[e] = T(-wr * a2[a][b]);
      dscale[e] = T(-wr * a3[a][b]);
    }
}

template <int K, typename T>
SWISK_FN void wavelet_kan_fwd_body(SkIdx id, SWISK_CONST WaveletParams& p, SWISK_GLOBAL const T* x,
                                   SWISK_GLOBAL const T* scale, SWISK_GLOBAL const T* trans,
                                   SWISK_GLOBAL const T* weight, SWISK_GLOBAL T* y, SWISK_TG float* s0,
                                   SWISK_TG float* s1, SWISK_TG float* s2, SWISK_TG float* s3) {
  const sk_u32 to = wav_tiles(p.out);
  for (sk_u64 tile = id.bx; tile < wav_fwd_tiles(p); tile += id.gdx)
    wav_fwd_tile<K, T>(id.tx, p, x, scale, trans, weight, y, sk_u32(tile / to) * SWISK_WAV_TILE,
                       sk_u32(tile % to) * SWISK_WAV_TILE, s0, s1, s2, s3);
}

// The whole backward in one launch: a block's tile (uniform across the block) picks its pass.
template <int K, typename T>
SWISK_FN void wavelet_kan_bwd_body(SkIdx id, SWISK_CONST WaveletParams& p, SWISK_GLOBAL const T* x,
                                   SWISK_GLOBAL const T* scale, SWISK_GLOBAL const T* trans,
                                   SWISK_GLOBAL const T* weight, SWISK_GLOBAL const T* g, SWISK_GLOBAL T* dx,
                                   SWISK_GLOBAL T* dscale, SWISK_GLOBAL T* dtrans, SWISK_GLOBAL T* dweight,
                                   SWISK_TG float* s0, SWISK_TG float* s1, SWISK_TG float* s2, SWISK_TG float* s3) {
  const sk_u32 ti = wav_tiles(p.in);
  const sk_u64 n_params = sk_u64(wav_tiles(p.out)) * ti;
  for (sk_u64 tile = id.bx; tile < wav_bwd_tiles(p); tile += id.gdx) {
    if (tile < n_params) {
      wav_bwd_params_tile<K, T>(id.tx, p, x, scale, trans, weight, g, dscale, dtrans, dweight,
                                sk_u32(tile / ti) * SWISK_WAV_TILE, sk_u32(tile % ti) * SWISK_WAV_TILE, s0, s1);
    } else {
      const sk_u64 r = tile - n_params;
      wav_bwd_x_tile<K, T>(id.tx, p, x, scale, trans, weight, g, dx, sk_u32(r / ti) * SWISK_WAV_TILE,
                           sk_u32(r % ti) * SWISK_WAV_TILE, s0, s1, s2, s3);
    }
  }
}

#endif  // SWISK_BARRIER
