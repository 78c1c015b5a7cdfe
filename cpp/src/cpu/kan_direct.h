// The CPU fused forward for a few rows (fp32/fp64; kan.cpp): no repacking of the weights. Each row's
// bases are laid out densely (in · n_basis, zero outside the row's window), then every output is the
// dot product of its spline_weight row with them, the weights scaled lane by lane by their feature's
// scaler (a permutation of a vector of scalers), plus base_weight's row with silu(x): one pass over
// the parameters as stored, where the repacked path reads them, writes the copy and reads that. The
// zero bases multiply the weights as the formulation's dense product does (0 · inf is NaN here too).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "clones.h"
#include "kan_locals.h"
#include "kan_repack.h"
#include "parallel.h"
#include "vec_math.h"

namespace swisk::cpu {
namespace {

// v's lanes in the order idx gives (lane l of the result is v[idx[l]]), indices known at run time.
template <typename A>
SK_VEC_INLINE VW<A> vpermute(VW<A> v, typename VecW<A>::index idx) {
#if defined(__clang__)
  VW<A> r;
  for (int64_t l = 0; l < kLanes<A>; ++l) r[l] = v[idx[l]];
  return r;
#else
  return __builtin_shuffle(v, idx);
#endif
}

// A vector of lane indices from memory (one vector's bytes at p).
template <typename A, typename Lane>
SK_VEC_INLINE typename VecW<A>::index lane_index(const Lane* p) {
  typename VecW<A>::index v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

// One call's operands: the rows' dense bases bx (R, cols rounded up to lanes) and silu values sl (R,
// in rounded up to lanes), zero-padded; per vector b of a row's columns, the first feature it touches
// f0[b], how many scalers from there lie in the row nf[b], and each lane's feature counted from f0[b].
template <typename A>
struct DirectOperands {
  using Lane = std::conditional_t<sizeof(A) == 4, int32_t, int64_t>;  // VecW<A>::index's lanes
  int64_t cols, colsp, inp;
  std::vector<A> bx, sl;
  std::vector<int64_t> f0, nf;
  std::vector<Lane> idx;  // lanes per block (a vector type's alignment is lost in a template argument)
  typename VecW<A>::index lanes(int64_t b) const { return lane_index<A>(idx.data() + b * kLanes<A>); }
};

template <int K, typename A>
DirectOperands<A> direct_operands(const Ctx<A, A>& c) {
  const KanParams& p = c.p;
  constexpr int64_t L = kLanes<A>;
  const int64_t in = p.in, nb = p.n_basis, rows = p.rows;
  DirectOperands<A> d;
  d.cols = in * nb;
  d.colsp = (d.cols + L - 1) / L * L;
  d.inp = (in + L - 1) / L * L;
  d.bx.assign(rows * d.colsp, A(0));
  d.sl.assign(rows * d.inp, A(0));
  std::vector<A> xa((in + kFeats - 1) / kFeats * kFeats + L);
  Local<K, A, false> l[kFeats];
  for (int64_t r = 0; r < rows; ++r) {
    A *bx = d.bx.data() + r * d.colsp, *sl = d.sl.data() + r * d.inp;
    for (int64_t f0 = 0; f0 < in; f0 += kFeats) {
      const int64_t n = std::min<int64_t>(kFeats, in - f0);
      forward_locals<K>(c, r, f0, n, xa.data(), l);
      for (int64_t f = 0; f < n; ++f) {
        sl[f0 + f] = l[f].c[0];
        for (int q = 0; q <= K; ++q) {  // window rows past n_basis are the repacked layout's zero rows
          const int64_t j = l[f].row - 1 + q;
          if (j < nb) bx[(f0 + f) * nb + j] = l[f].c[q + 1];
        }
      }
    }
  }
  const int64_t blocks = d.colsp / L;
  d.f0.resize(blocks), d.nf.resize(blocks), d.idx.resize(blocks * L);
  for (int64_t b = 0; b < blocks; ++b) {
    d.f0[b] = b * L / std::max<int64_t>(nb, 1);
    d.nf[b] = std::min<int64_t>(L, in - d.f0[b]);
    for (int64_t e = 0; e < L; ++e)  // lanes past the row: any valid lane (their weights are zeroed)
      d.idx[b * L + e] = b * L + e < d.cols ? (b * L + e) / nb - d.f0[b] : 0;
  }
  return d;
}

// y[r, o] for the R rows and outputs [lo, hi).
template <int R, typename A>
SK_CLONES_FLAT void direct_outputs(const Ctx<A, A>& c, const DirectOperands<A>& d, A* y, int64_t lo, int64_t hi) {
  using V = VW<A>;
  constexpr int64_t L = kLanes<A>;
  const KanParams& p = c.p;
  const int64_t in = p.in, cols = d.cols, full = cols / L, tail = cols - full * L;
  for (int64_t o = lo; o < hi; ++o) {
    const A* w = c.sw + o * cols;
    const A* s = p.has_scaler ? c.sc + o * in : nullptr;
    V acc[R] = {};
    const auto add = [&](int64_t b, V ws, int64_t n) {  // n: the block's columns in the row
      if (s) ws *= vpermute<A>(vload_part(s + d.f0[b], d.nf[b]), d.lanes(b));
      for (int64_t e = n; e < L; ++e) ws[e] = A(0);  // not w · s past the row: 0 · inf would be NaN
      for (int r = 0; r < R; ++r) acc[r] += ws * vload(d.bx.data() + r * d.colsp + b * L);
    };
    for (int64_t b = 0; b < full; ++b) add(b, vload(w + b * L), L);
    if (tail) add(full, vload_part(w + full * L, tail), tail);
    A base[R] = {};
    if (p.has_base) {
      const A* bw = c.bw + o * in;
      V ab[R] = {};
      for (int64_t i = 0; i < in; i += L) {
        const V wv = vload_part(bw + i, std::min<int64_t>(L, in - i));
        for (int r = 0; r < R; ++r) ab[r] += wv * vload(d.sl.data() + r * d.inp + i);
      }
      for (int r = 0; r < R; ++r) base[r] = vsum<A>(ab[r]);
    }
    for (int r = 0; r < R; ++r) y[r * p.out + o] = base[r] + vsum<A>(acc[r]);
  }
}

// The forward of rows <= kKanCpuDirectRows (kan_cpu_direct), outputs split across threads.
template <int K, typename A>
void direct_forward(const Ctx<A, A>& c, A* y) {
  const KanParams& p = c.p;
  const DirectOperands<A> d = direct_operands<K>(c);
  const int64_t per_output = int64_t(p.rows) * (d.colsp + d.inp);
  parallel_for(p.out, work_grain(1, per_output), [&](int64_t lo, int64_t hi) {
    switch (p.rows) {
      case 1: return direct_outputs<1>(c, d, y, lo, hi);
      case 2: return direct_outputs<2>(c, d, y, lo, hi);
      case 3: return direct_outputs<3>(c, d, y, lo, hi);
      default: return direct_outputs<4>(c, d, y, lo, hi);
    }
  });
}
static_assert(kKanCpuDirectRows == 4, "direct_forward covers 1 to 4 rows");

// The backward of rows <= kKanCpuDirectBackRows in one pass over the parameters as stored, their
// gradients written as stored. Features go in blocks of L (a block's columns: c0 = i0 · n_basis on, nb
// vectors at most), a thread per range of blocks, in tiles of blocks whose sums stay in L2, each tile
// walking the outputs in order (an output's columns of the tile: one run of memory). Per output o and
// block, with g_r = gy[r, o] and t = Σ_r g_r · B_r (the dense bases): grad_spline_weight = scaler · t,
// grad_spline_scaler = Σ_j t · w, grad_base_weight = Σ_r g_r · silu_r, while q_r += g_r · scaler · w and
// qb_r += g_r · base_weight sum what dx needs: then dx = qb_r · silu' + the window's columns of q_r
// times the bases' derivatives (as the repacked backward: only the window's weights reach dx). Each
// feature's sums run over the outputs in order in one thread: the same bits for any thread count.
template <int K, typename A>
struct DirectBack {
  int64_t rows, colsp, inp, nv;  // nv: vectors of a whole block's columns
  std::vector<Local<K, A, true>> loc;  // (in, rows)
  std::vector<A> bx, sl;               // dense bases (rows, colsp), silu (rows, inp), zero-padded
  std::vector<typename DirectOperands<A>::Lane> idx;  // per vector of a block's columns: each lane's feature
  typename VecW<A>::index lanes(int64_t v) const { return lane_index<A>(idx.data() + v * kLanes<A>); }
};

constexpr int64_t kDirectTileBytes = 192 << 10;  // a tile's sums and bases (q, bx): within L2

// Blocks [b0, b1) (a tile): their gradients, and dx of their features. RT: the rows (0: d.rows at run
// time). q: (b1 - b0) · rows · nv · L scratch, qb: (b1 - b0) · rows · L, pr: nv · L.
template <int K, int RT, typename A>
SK_CLONES_FLAT void direct_back_tile(const Ctx<A, A>& c, const KanLinearBackwardArgs& a, const DirectBack<K, A>& d,
                                     const A* gy, int64_t b0, int64_t b1, A* q, A* qb, A* pr) {
  using V = VW<A>;
  constexpr int64_t L = kLanes<A>;
  const KanParams& p = c.p;
  const int R = RT > 0 ? RT : int(d.rows);
  const int64_t in = p.in, out = p.out, nb = p.n_basis, cols = in * nb, nv = d.nv;
  const bool nx = a.need_x, nw = a.need_weights, base = p.has_base, scaled = p.has_scaler;
  A *gbw = nw && base ? a.grad_base_weight.ptr<A>() : nullptr, *gsw = nw ? a.grad_spline_weight.ptr<A>() : nullptr;
  A* gsc = nw && scaled ? a.grad_spline_scaler.ptr<A>() : nullptr;
  std::fill(q, q + (b1 - b0) * R * nv * L, A(0));
  std::fill(qb, qb + (b1 - b0) * R * L, A(0));
  for (int64_t o = 0; o < out; ++o) {
    A g[RT > 0 ? RT : kKanCpuDirectBackRows];
    for (int r = 0; r < R; ++r) g[r] = gy[r * out + o];
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i0 = b * L, f = std::min<int64_t>(L, in - i0), bc = f * nb, c0 = i0 * nb;
      A *qr = q + (b - b0) * R * nv * L, *qbr = qb + (b - b0) * R * L;
      const A* w = c.sw + o * cols + c0;
      const V s = scaled ? vload_part(c.sc + o * in + i0, f) : V{} + A(1);
      if (nx && base) {
        const V bv = vload_part(c.bw + o * in + i0, f);
        for (int r = 0; r < R; ++r) vstore(qbr + r * L, vload(qbr + r * L) + g[r] * bv);
      }
      for (int64_t v = 0; v * L < bc; ++v) {
        const int64_t n = std::min<int64_t>(L, bc - v * L);
        const V wv = vload_part(w + v * L, n), sp = scaled ? vpermute<A>(s, d.lanes(v)) : s;
        if (nx) {  // lanes past the block are never read
          const V ws = wv * sp;
          for (int r = 0; r < R; ++r) vstore(qr + (r * nv + v) * L, vload(qr + (r * nv + v) * L) + g[r] * ws);
        }
        if (nw) {
          V t = V{};
          for (int r = 0; r < R; ++r) t += g[r] * vload(d.bx.data() + r * d.colsp + c0 + v * L);
          vstore_part(gsw + o * cols + c0 + v * L, t * sp, n);
          vstore(pr + v * L, t * wv);
        }
      }
      if (gbw) {
        V t = V{};
        for (int r = 0; r < R; ++r) t += g[r] * vload(d.sl.data() + r * d.inp + i0);
        vstore_part(gbw + o * in + i0, t, f);
      }
      if (gsc)
        for (int64_t e = 0; e < f; ++e) {
          A t = A(0);
          for (int64_t j = 0; j < nb; ++j) t += pr[e * nb + j];
          gsc[o * in + i0 + e] = t;
        }
    }
  }
  if (!nx) return;
  A* gx = a.grad_x.ptr<A>();
  for (int64_t b = b0; b < b1; ++b)
    for (int r = 0; r < R; ++r)
      for (int64_t e = 0, i0 = b * L; e < std::min<int64_t>(L, in - i0); ++e) {
        const Local<K, A, true>& l = d.loc[(i0 + e) * R + r];
        A t = base ? qb[((b - b0) * R + r) * L + e] * l.d[0] : A(0);
        for (int k = 0; k <= K; ++k) {
          const int64_t j = l.row - 1 + k;  // window rows past n_basis: the repacked layout's zero rows
          if (j < nb) t += q[((b - b0) * R + r) * nv * L + e * nb + j] * l.d[k + 1];
        }
        gx[r * in + i0 + e] = t;
      }
}

// The backward of rows <= kKanCpuDirectBackRows (kan_cpu_direct_back): ranges of feature blocks across
// threads, each in tiles.
template <int K, typename A>
void direct_backward(Ctx<A, A> c, const KanLinearBackwardArgs& a, const A* gy) {
  const KanParams& p = c.p;
  constexpr int64_t L = kLanes<A>;
  if (p.out == 0 || p.in == 0) return;  // the prepared call zeroes what is left
  const int64_t rows = p.rows, in = p.in, nb = p.n_basis;
  DirectBack<K, A> d;
  d.rows = rows, d.colsp = (in * nb + L - 1) / L * L, d.inp = (in + L - 1) / L * L, d.nv = std::max<int64_t>(nb, 1);
  d.loc.resize(in * rows);
  c.i0 = 0, c.ic = in;
  {
    const int64_t padded = (in + kFeats - 1) / kFeats * kFeats;
    std::vector<A> buf(3 * padded);
    backward_locals<K, false>(c, 0, rows, 0, rows, d.loc.data(), buf.data(), buf.data() + padded,
                              buf.data() + 2 * padded, a.need_x);
  }
  d.bx.assign(rows * d.colsp, A(0)), d.sl.assign(rows * d.inp, A(0));
  for (int64_t i = 0; i < in; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      const Local<K, A, true>& l = d.loc[i * rows + r];
      d.sl[r * d.inp + i] = l.c[0];
      for (int k = 0; k <= K; ++k) {
        const int64_t j = l.row - 1 + k;
        if (j < nb) d.bx[r * d.colsp + i * nb + j] = l.c[k + 1];
      }
    }
  d.idx.resize(d.nv * L);
  for (int64_t e = 0; e < d.nv * L; ++e) d.idx[e] = e < L * nb ? e / nb : 0;
  const int64_t blocks = (in + L - 1) / L, work = int64_t(p.out) * in * (nb + 2) * rows;
  const int64_t ranges = std::max<int64_t>(1, std::min<int64_t>({blocks, int64_t(max_threads()), work / kMinWork}));
  const int64_t per_block = 2 * rows * d.nv * L * int64_t(sizeof(A));  // q and bx
  const int64_t tile = std::max<int64_t>(1, kDirectTileBytes / per_block);
  parallel_for(ranges, 1, [&](int64_t t, int64_t) {
    const int64_t b0 = blocks * t / ranges, b1 = blocks * (t + 1) / ranges, nt = std::min(tile, b1 - b0);
    std::vector<A> q(nt * rows * d.nv * L), qb(nt * rows * L), pr(d.nv * L);
    for (int64_t t0 = b0; t0 < b1; t0 += nt) {
      const int64_t t1 = std::min(b1, t0 + nt);
      switch (rows) {
        case 1: direct_back_tile<K, 1>(c, a, d, gy, t0, t1, q.data(), qb.data(), pr.data()); break;
        case 2: direct_back_tile<K, 2>(c, a, d, gy, t0, t1, q.data(), qb.data(), pr.data()); break;
        case 3: direct_back_tile<K, 3>(c, a, d, gy, t0, t1, q.data(), qb.data(), pr.data()); break;
        case 4: direct_back_tile<K, 4>(c, a, d, gy, t0, t1, q.data(), qb.data(), pr.data()); break;
        default: direct_back_tile<K, 0>(c, a, d, gy, t0, t1, q.data(), qb.data(), pr.data()); break;
      }
    }
  });
}

}  // namespace
}  // namespace swisk::cpu
