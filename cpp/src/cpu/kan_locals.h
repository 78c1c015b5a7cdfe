// The CPU fused KAN kernels' locals (kan.cpp): what each x[n, i] contributes, its silu and its order+1
// non-zero bases (with derivatives in backward), placed in the window of spline rows they touch;
// evaluated one feature at a time, in vector lanes of features on uniform knots, or, with fewer
// features than lanes, in lanes of (row, feature) pairs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "bspline_uniform.h"
#include "clones.h"
#include "kan_repack.h"
#include "vec_math.h"

namespace swisk::cpu {
namespace {

constexpr int64_t kFeats = 16;  // forward: features per block (their weight tiles stay in L1)
constexpr int64_t kRows = 128;  // forward: most rows per block (they reuse those tiles)

// What x[n, i] contributes: coefficients of wt's rows 0 and row .. row+K (silu's first), and with D
// their derivatives in x. Outside the grid the coefficients are 0 (NaN for NaN x) and row is 1.
template <int K, typename A, bool D>
struct Local {
  A c[K + 2];
  A d[D ? K + 2 : 1];
  int32_t row;
};

// Sets l.row for knot interval s (< 0: outside the grid) from the bases of splines s-K .. s in
// l.c[1..K+1] (and l.d): the window of K+1 spline rows starts at s-K clamped to [0, hi] (hi = ns-1-K),
// the coefficients shifted to match (a spline outside the window has a zero basis there).
template <int K, typename A, bool D>
SK_VEC_INLINE void place(Local<K, A, D>& l, int s, int hi) {
  const int j0 = s < 0 ? 0 : s - K, st = j0 < 0 ? 0 : j0 > hi ? hi : j0, sh = st - j0;
  l.row = 1 + st;
  if (sh == 0) [[likely]] return;
  A c[K + 1], d[K + 1];
  for (int q = 0; q <= K; ++q) {
    const bool in = q + sh >= 0 && q + sh <= K;
    c[q] = in ? l.c[1 + q + sh] : A(0);
    if constexpr (D) d[q] = in ? l.d[1 + q + sh] : A(0);
  }
  for (int q = 0; q <= K; ++q) {
    l.c[1 + q] = c[q];
    if constexpr (D) l.d[1 + q] = d[q];
  }
}

template <int K, bool D, typename T, typename A>
SK_VEC_INLINE void local(const Ctx<T, A>& c, int64_t i, A xv, Local<K, A, D>& l) {
  const KanParams& p = c.p;
  A v[K + 1], dv[K + 1];
  const sk_i32 s = bspline_local_k<K>(xv, c.grid + i * p.n_knots, c.inv + i * K * int64_t(p.n_knots),
                                      sk_i32(p.n_knots), v, dv);
  l.c[0] = p.has_base ? kan_silu(xv) : A(0);
  for (int q = 0; q <= K; ++q) l.c[q + 1] = v[q];
  if constexpr (D) {
    l.d[0] = p.has_base ? kan_silu_grad(xv) : A(0);
    for (int q = 0; q <= K; ++q) l.d[q + 1] = dv[q];
  }
  place(l, s, int(c.ns) - 1 - K);
}

// The locals of row n, features [f0, f0 + nf): uniform knots in vector lanes (xa: the thread's row
// buffer, padded to whole blocks of lanes), else one by one.
template <int K, typename T, typename A>
SK_VEC_INLINE void forward_locals(const Ctx<T, A>& c, int64_t n, int64_t f0, int64_t nf, A* xa,
                                  Local<K, A, false>* l) {
  const KanParams& p = c.p;
  const T* xr = c.x + n * p.in;
  if (c.uv == nullptr) {
    for (int64_t f = 0; f < nf; ++f) local<K, false>(c, f0 + f, A(xr[f0 + f]), l[f]);
    return;
  }
  constexpr int L = uniform_lanes<A>();
  A silu[L], v[K + 1][L];
  int span[L];
  for (int64_t s0 = 0; s0 < nf; s0 += L) {
    const int64_t ns = std::min<int64_t>(L, nf - s0), i0 = f0 + s0;
    for (int64_t e = 0; e < L; ++e) xa[i0 + e] = e < ns ? A(xr[i0 + e]) : A(0);
    silu_row<A, A, A>(xa + i0, silu, L, 0);
    uniform_block<K, A>(*c.uv, xa, i0, p.n_knots, false, v, span);
    for (int64_t e = 0; e < ns; ++e) {
      Local<K, A, false>& d = l[s0 + e];
      d.c[0] = p.has_base ? silu[e] : A(0);
      for (int q = 0; q <= K; ++q) d.c[q + 1] = v[q][e];
      place(d, span[e], int(c.ns) - 1 - K);
    }
  }
}

// Fewer features than lanes (c.ut: uniform knots): the locals of rows [n0, n0 + nr) with
// the rows' features laid end to end as in x, a block of lanes of (row, feature) pairs at a time (a
// lane's result does not depend on its neighbours). xa, sl: nr · in + lanes of scratch. Writes
// l[r · kFeats + i] (D: c.d too; dx false: derivatives left 0) or, with stride s > 0, l[i · s + r].
template <int K, bool D, typename T, typename A>
SK_VEC_INLINE void locals_by_rows(const Ctx<T, A>& c, int64_t n0, int64_t nr, A* xa, A* sl, A* dsl,
                                  Local<K, A, D>* l, int64_t stride, bool dx) {
  const KanParams& p = c.p;
  constexpr int L = uniform_lanes<A>();
  const int64_t in = p.in, n = nr * in;
  const T* xr = c.x + n0 * in;
  for (int64_t e = 0; e < n + L; ++e) xa[e] = e < n ? A(xr[e]) : A(0);
  silu_row<A, A, A>(xa, sl, n, 0);
  if (D && dx) silu_row<A, A, A>(xa, dsl, n, 1);
  A v[K + 1][L], dv[K + 1][L] = {};
  int span[L];
  int64_t r = 0, i = 0;  // the pair of flat index s + e
  for (int64_t s = 0; s < n; s += L) {
    uniform_block<K, A>(*c.ut, xa + s - i, i, p.n_knots, false, v, span);
    if (D && dx) uniform_block<K, A>(*c.ut, xa + s - i, i, p.n_knots, true, dv, span);
    for (int64_t e = 0; e < L && s + e < n; ++e) {
      Local<K, A, D>& d = stride ? l[i * stride + r] : l[r * kFeats + i];
      d.c[0] = p.has_base ? sl[s + e] : A(0);
      for (int q = 0; q <= K; ++q) d.c[q + 1] = v[q][e];
      if constexpr (D) {
        d.d[0] = p.has_base && dx ? dsl[s + e] : A(0);
        for (int q = 0; q <= K; ++q) d.d[q + 1] = dv[q][e];
      }
      place(d, span[e], int(c.ns) - 1 - K);
      if (++i == in) i = 0, ++r;
    }
  }
}

// locals_by_rows as a function of its own (one clone per ISA level): not flattened into its callers,
// whose hot loops then compile as they do without it.
template <int K, bool D, typename T, typename A>
SK_CLONES_FLAT void locals_by_rows_any(const Ctx<T, A>& c, int64_t n0, int64_t nr, A* xa, A* sl, A* dsl,
                                       Local<K, A, D>* l, int64_t stride, bool dx) {
  locals_by_rows<K, D>(c, n0, nr, xa, sl, dsl, l, stride, dx);
}

// The locals (with derivatives when dx) of rows [n0, n0 + nn), the chunk's features, into
// loc[(i - i0) * nn + r]: uniform knots in vector lanes, else one by one. xa, silu, dsilu: row buffers
// padded to whole blocks of lanes (i0 is a multiple of them).
template <int K, bool ByRows, typename T, typename A>
void backward_locals(const Ctx<T, A>& c, int64_t n0, int64_t nn, int64_t lo, int64_t hi, Local<K, A, true>* loc,
                     A* xa, A* silu, A* dsilu, bool dx) {
  const KanParams& p = c.p;
  constexpr int L = uniform_lanes<A>();
  const int64_t i0 = c.i0, i1 = c.i0 + c.ic;
  if constexpr (ByRows) {  // few features (all in the chunk): by rows, kRows at a time
    for (int64_t r0 = lo; r0 < hi; r0 += kRows)
      locals_by_rows_any<K, true>(c, n0 + r0, std::min(kRows, hi - r0), xa, silu, dsilu, loc + r0, nn, dx);
    return;
  }
  for (int64_t r = lo; r < hi; ++r) {
    const T* xr = c.x + (n0 + r) * p.in;
    if (c.ud == nullptr) {
      for (int64_t i = i0; i < i1; ++i) local<K, true>(c, i, A(xr[i]), loc[(i - i0) * nn + r]);
      continue;
    }
    for (int64_t i = i0; i < i1; ++i) xa[i] = A(xr[i]);
    silu_row<A, A, A>(xa + i0, silu + i0, c.ic, 0);
    if (dx) silu_row<A, A, A>(xa + i0, dsilu + i0, c.ic, 1);
    A v[K + 1][L], dv[K + 1][L] = {};
    int span[L];
    for (int64_t b = i0; b < i1; b += L) {
      uniform_block<K, A>(*c.ud, xa, b, p.n_knots, false, v, span);
      if (dx) uniform_block<K, A>(*c.ud, xa, b, p.n_knots, true, dv, span);
      for (int64_t e = 0; e < L && b + e < i1; ++e) {
        Local<K, A, true>& d = loc[(b + e - i0) * nn + r];
        d.c[0] = p.has_base ? silu[b + e] : A(0);
        d.d[0] = p.has_base && dx ? dsilu[b + e] : A(0);
        for (int q = 0; q <= K; ++q) d.c[q + 1] = v[q][e], d.d[q + 1] = dv[q][e];
        place(d, span[e], int(c.ns) - 1 - K);
      }
    }
  }
}

}  // namespace
}  // namespace swisk::cpu
