// The CPU fused KAN kernels' repacked weights (kan.cpp): the context of a call and its chunk, and the
// repacking of a chunk's parameters into wt, (in, out/lanes, nq, lanes), and of its gradient gwt back
// into the three parameter gradients. For fp32/fp64 both run on lanes x lanes transposes in registers
// (contiguous loads and stores); fp16/bf16 inputs take element loops.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "bspline_uniform.h"
#include "clones.h"
#include "parallel.h"
#include "swisk/ops/kan.h"
#include "vec_math.h"

// Internal to each file that includes it (cpu/kan.cpp, cpu/kan_backward.cpp): their target_clones
// templates are never one symbol shared by two files.
namespace swisk::cpu {
namespace {

// Repacking: vectors of a parameter row prefetched ahead (lanes rows stream at once). Fused fwd+bwd, 1
// thread, medians of alternating builds, b1 1000->1000, in 64-byte vectors: 4 vectors 12.6 ms against 8's
// 13.4, 2 14.1 against 4's 13.0, 32 16.3 against 8's 13.3; b100 1000->1000: 4 35.9 against 8's 36.6 ms.
// The same 256 bytes in vectors of either width.
constexpr int64_t kAhead = 256 / SK_VEC_BYTES;
constexpr int64_t kAheadFeatures = 4;  // (un)packing: features whose block of rows is prefetched ahead

// Prefetches the nq rows (of lanes) at w, for reading, or for writing with W.
template <bool W = false, typename A>
SK_VEC_INLINE void prefetch_rows(const A* w, int64_t nq, int64_t rs) {
  for (int64_t r = 0; r < nq; ++r) __builtin_prefetch(w + r * rs, W ? 1 : 0);
}

// Items per parallel chunk so that a chunk holds at least kMinWork multiply-adds: below that, forking
// threads costs more than it saves (one small layer runs serially).
constexpr int64_t kMinWork = 1 << 16;
inline int64_t work_grain(int64_t grain, int64_t work_per_item) {
  return std::max(grain, kMinWork / std::max<int64_t>(1, work_per_item));
}

template <typename T, typename A>
struct Ctx {
  KanParams p;
  const T *x, *grid, *bw, *sw, *sc;
  A* inv;  // (in, order, n_knots): 1 / (g[j+k] - g[j])
  A* wt;   // (ic, outp / lanes, nq, lanes): the chunk's features [i0, i0 + ic) and outputs [o0, o0 + oc)
  int64_t ns, nq, outp, o0, oc, i0, ic;  // outp: oc rounded up to whole vectors
  bool back;  // backward: spline rows unscaled, the scalers in row 1 + ns
  int64_t rs, vs, fs;  // strides of a row, of a vector of outputs, of a feature
  const UniformKnots<A>* uv;  // uniform knots for the bases (forward), and their derivatives too (ud)
  const UniformKnots<A>* ud;
  const UniformKnots<A>* ut = nullptr;  // uv / ud tiled along rows (UniformKnots::tiled), for few features
  // Row r of the chunk's feature i (counted from i0), and row 0 of its vector ob.
  A* at(A* base, int64_t i, int64_t r) const { return base + i * fs + r * rs; }
  A* vec(A* base, int64_t i, int64_t ob) const { return base + i * fs + ob * vs; }
};

// Fills inv (per feature): 1 / (g[j+k] - g[j]).
template <typename T, typename A>
void knot_inverses(const Ctx<T, A>& c) {
  const KanParams& p = c.p;
  const int64_t nk = p.n_knots, K = p.order;
  parallel_for(p.in, work_grain(8, K * nk), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t k = 1; k <= K; ++k)
        for (int64_t j = 0; j + k < nk; ++j)
          c.inv[(i * K + k - 1) * nk + j] = A(1) / (A(c.grid[i * nk + j + k]) - A(c.grid[i * nk + j]));
  });
}

// v[l] = n elements of row l (rows stride apart from r) for l < m, else zeros; each row's vector kAhead
// ahead prefetched (lanes rows in step: the hardware's streams lag).
template <typename A>
SK_VEC_INLINE void load_rows(VW<A>* v, const A* r, int64_t stride, int64_t m, int64_t n) {
  for (int64_t l = 0; l < kLanes<A>; ++l) {
    if (l < m) __builtin_prefetch(r + l * stride + kAhead * kLanes<A>);
    v[l] = l < m ? vload_part(r + l * stride, n) : VW<A>{};
  }
}

// wt's vector block ob of the chunk (T = A): lanes x lanes blocks of the parameters' rows transposed in
// registers, so every load and store is a contiguous vector. s: scratch for the features' scaler
// vectors (ic · lanes; forward). Returns a sum that is NaN when a (forward: scaled) spline weight is inf
// or NaN.
template <typename A>
SK_VEC_INLINE A pack_block(const Ctx<A, A>& c, int64_t ob, A* s) {
  using V = VW<A>;
  constexpr int64_t L = kLanes<A>;
  const KanParams& p = c.p;
  const int64_t in = p.in, nb = p.n_basis;
  const int64_t o0 = c.o0 + ob * L, m = std::min<int64_t>(L, c.o0 + c.oc - o0);
  V v[L];
  for (int64_t f0 = 0; f0 < c.ic; f0 += L) {  // silu's row (base_weight) and the scalers
    const int64_t nf = std::min<int64_t>(L, c.ic - f0), i = c.i0 + f0;
    load_rows(v, p.has_base ? c.bw + o0 * in + i : nullptr, in, p.has_base ? m : 0, nf);
    vtranspose<A>(v);
    for (int64_t e = 0; e < nf; ++e) vstore(c.vec(c.wt, f0 + e, ob), v[e]);
    load_rows(v, p.has_scaler ? c.sc + o0 * in + i : nullptr, in, p.has_scaler ? m : 0, nf);
    if (!p.has_scaler) std::fill(v, v + L, V{} + A(1));
    vtranspose<A>(v);
    for (int64_t e = 0; e < nf; ++e)  // backward: into the scalers' row; forward: to scale the spline rows
      vstore(c.back ? c.vec(c.wt, f0 + e, ob) + (1 + c.ns) * c.rs : s + (f0 + e) * L, v[e]);
  }
  for (int64_t f = 0; f < c.ic; ++f)  // the zero rows (fewer than K+1 spline rows)
    for (int64_t r = 1 + nb; r <= c.ns; ++r) vstore(c.vec(c.wt, f, ob) + r * c.rs, V{});
  V bad{};  // sum of w - w: NaN once a w is inf or NaN
  const int64_t end = (c.i0 + c.ic) * nb;
  int64_t f = 0, j = 0;  // the chunk's feature and the basis of column cc + e
  for (int64_t cc = c.i0 * nb; cc < end; cc += L) {  // spline rows: columns of sw's (in · nb) rows
    const int64_t n = std::min<int64_t>(L, end - cc);
    load_rows(v, c.sw + o0 * in * nb + cc, in * nb, m, n);
    vtranspose<A>(v);
    for (int64_t e = 0; e < n; ++e) {
      const V w = c.back ? v[e] : v[e] * vload(s + f * L);
      vstore(c.vec(c.wt, f, ob) + (1 + j) * c.rs, w);
      bad += w - w;
      if (++j < nb) continue;
      j = 0, ++f;
      if (f + kAheadFeatures < c.ic) prefetch_rows<true>(c.vec(c.wt, f + kAheadFeatures, ob), c.nq, c.rs);
    }
  }
  return vsum<A>(bad);
}

template <typename A>
SK_CLONES_FLAT A pack_block_any(const Ctx<A, A>& c, int64_t ob, A* s) {
  return pack_block(c, ob, s);
}

// Fills wt with the chunk's weights (per block of kLanes outputs, each element written once, the pads
// as zeros); true when a scaled spline weight is inf or NaN.
template <typename T, typename A>
bool pack(const Ctx<T, A>& c) {
  const KanParams& p = c.p;
  const int64_t nb = p.n_basis, in = p.in, L = kLanes<A>;
  std::atomic<bool> nonfinite{false};
  if constexpr (std::is_same_v<T, A>) {
    parallel_for(c.outp / L, work_grain(1, c.ic * c.nq * L), [&](int64_t lo, int64_t hi) {
      std::vector<A> s(c.ic * L);
      A bad = A(0);
      for (int64_t ob = lo; ob < hi; ++ob) bad += pack_block_any(c, ob, s.data());
      if (bad != bad) nonfinite.store(true, std::memory_order_relaxed);
    });
    return nonfinite.load();
  }
  parallel_for(c.outp / L, work_grain(1, c.ic * c.nq * L), [&](int64_t lo, int64_t hi) {
    A bad = A(0);  // sum of v - v: NaN once a v is inf or NaN
    for (int64_t ob = lo; ob < hi; ++ob) {
      const int64_t o0 = c.o0 + ob * L, m = std::min<int64_t>(L, c.o0 + c.oc - o0);
      for (int64_t f = 0; f < c.ic; ++f) {
        const int64_t i = c.i0 + f;
        A* w = c.vec(c.wt, f, ob);
        A s[kLanes<A>];
        for (int64_t l = 0; l < L; ++l) {
          const int64_t oi = (o0 + l) * in + i;
          w[l] = l < m && p.has_base ? A(c.bw[oi]) : A(0);
          s[l] = l < m && p.has_scaler ? A(c.sc[oi]) : A(1);
          if (c.back) w[(1 + c.ns) * c.rs + l] = s[l], s[l] = A(1);
        }
        for (int64_t r = 1; r <= c.ns; ++r) {
          A* wr = w + r * c.rs;
          const int64_t j = r - 1;
          if (j < 0 || j >= nb) {
            std::fill(wr, wr + L, A(0));
            continue;
          }
          const T* src = c.sw + (o0 * in + i) * nb + j;
          for (int64_t l = 0; l < L; ++l) {
            const A v = l < m ? A(src[l * in * nb]) * s[l] : A(0);
            wr[l] = v;
            bad += v - v;
          }
        }
      }
    }
    if (bad != bad) nonfinite.store(true, std::memory_order_relaxed);
  });
  return nonfinite.load();
}

// Calls f() for each chunk of the layout's outputs (forward) or features (backward) with c set to it.
template <typename T, typename A, class F>
void for_chunks(Ctx<T, A>& c, const KanCpuLayout& lay, F&& f) {
  for (int64_t o0 = 0; o0 < c.p.out; o0 += lay.outc) {
    c.o0 = o0, c.oc = std::min<int64_t>(lay.outc, c.p.out - o0);
    c.outp = (c.oc + kLanes<A> - 1) / kLanes<A> * kLanes<A>;
    for (int64_t i0 = 0; i0 < c.p.in; i0 += lay.inc) {
      c.i0 = i0, c.ic = std::min<int64_t>(lay.inc, c.p.in - i0);
      f();
    }
  }
}

// unpack_chunk's vector block ob (T = A), pack_block's transposes the other way round; the scaler's
// gradient sums gwt times wt's unscaled spline rows beside it. ds: scratch for the features' scaler
// gradient vectors (ic · lanes).
template <typename A>
SK_VEC_INLINE void unpack_block(const Ctx<A, A>& c, const KanLinearBackwardArgs& a, A* gwt, int64_t ob, A* ds) {
  using V = VW<A>;
  constexpr int64_t L = kLanes<A>;
  const KanParams& p = c.p;
  const int64_t in = p.in, nb = p.n_basis, sr = (1 + c.ns) * c.rs;  // sr: the scalers' row
  const int64_t o0 = c.o0 + ob * L, m = std::min<int64_t>(L, c.o0 + c.oc - o0);
  A *gbw = a.grad_base_weight.ptr<A>(), *gsw = a.grad_spline_weight.ptr<A>(), *gsc = a.grad_spline_scaler.ptr<A>();
  V v[L];
  for (int64_t f = 0; f < c.ic; ++f) vstore(ds + f * L, V{});
  for (int64_t f0 = 0; p.has_base && f0 < c.ic; f0 += L) {  // base_weight's gradient from silu's rows
    const int64_t nf = std::min<int64_t>(L, c.ic - f0), i = c.i0 + f0;
    for (int64_t e = 0; e < L; ++e) v[e] = e < nf ? vload(c.vec(gwt, f0 + e, ob)) : V{};
    vtranspose<A>(v);
    for (int64_t l = 0; l < m; ++l) vstore_part(gbw + (o0 + l) * in + i, v[l], nf);
  }
  const int64_t end = (c.i0 + c.ic) * nb;
  int64_t f = 0, j = 0;  // the chunk's feature and the basis of column cc
  for (int64_t cc = c.i0 * nb; cc < end; cc += L) {
    const int64_t n = std::min<int64_t>(L, end - cc);
    for (int64_t e = 0; e < L; ++e) {
      if (e >= n) {
        v[e] = V{};
        continue;
      }
      const A* w = c.vec(c.wt, f, ob);
      const V g = vload(c.vec(gwt, f, ob) + (1 + j) * c.rs);
      if (p.has_scaler) vstore(ds + f * L, vload(ds + f * L) + g * vload(w + (1 + j) * c.rs));
      v[e] = g * vload(w + sr);
      if (++j < nb) continue;
      j = 0, ++f;
      if (f + kAheadFeatures < c.ic) {  // a later feature's blocks: far apart in memory
        prefetch_rows(c.vec(gwt, f + kAheadFeatures, ob), c.nq, c.rs);
        prefetch_rows(c.vec(c.wt, f + kAheadFeatures, ob), c.nq, c.rs);
      }
    }
    vtranspose<A>(v);
    for (int64_t l = 0; l < m; ++l) vstore_part(gsw + (o0 + l) * in * nb + cc, v[l], n);
  }
  if (!p.has_scaler) return;
  for (int64_t f0 = 0; f0 < c.ic; f0 += L) {
    const int64_t nf = std::min<int64_t>(L, c.ic - f0);
    for (int64_t e = 0; e < L; ++e) v[e] = e < nf ? vload(ds + (f0 + e) * L) : V{};
    vtranspose<A>(v);
    for (int64_t l = 0; l < m; ++l) vstore_part(gsc + (o0 + l) * in + c.i0 + f0, v[l], nf);
  }
}

template <typename A>
SK_CLONES_FLAT void unpack_block_any(const Ctx<A, A>& c, const KanLinearBackwardArgs& a, A* gwt, int64_t ob, A* ds) {
  unpack_block(c, a, gwt, ob, ds);
}

// The chunk's gwt -> grad_base_weight, grad_spline_weight (times the scaler), grad_spline_scaler;
// per block of kLanes outputs, reading gwt's rows contiguously.
template <typename T, typename A>
void unpack_chunk(const Ctx<T, A>& c, const KanLinearBackwardArgs& a, A* gwt) {
  const KanParams& p = c.p;
  if constexpr (std::is_same_v<T, A>) {
    parallel_for(c.outp / kLanes<A>, work_grain(1, c.ic * p.n_basis * kLanes<A>), [&](int64_t lo, int64_t hi) {
      std::vector<A> ds(c.ic * kLanes<A>);
      for (int64_t ob = lo; ob < hi; ++ob) unpack_block_any(c, a, gwt, ob, ds.data());
    });
    return;
  }
  T *gbw = a.grad_base_weight.ptr<T>(), *gsw = a.grad_spline_weight.ptr<T>(), *gsc = a.grad_spline_scaler.ptr<T>();
  constexpr int64_t L = kLanes<A>;
  const int64_t nb = p.n_basis, in = p.in;
  parallel_for(c.outp / L, work_grain(1, c.ic * nb * L), [&](int64_t lo, int64_t hi) {
    for (int64_t ob = lo; ob < hi; ++ob) {
      const int64_t o0 = c.o0 + ob * L, m = std::min<int64_t>(L, c.o0 + c.oc - o0);
      for (int64_t f = 0; f < c.ic; ++f) {
        const int64_t i = c.i0 + f;
        const A *g = c.vec(gwt, f, ob), *w = c.vec(c.wt, f, ob), *s = w + (1 + c.ns) * c.rs;
        A ds[L];
        for (int64_t l = 0; l < m; ++l) {
          if (p.has_base) gbw[(o0 + l) * in + i] = T(g[l]);
          ds[l] = A(0);
        }
        for (int64_t j = 0; j < nb; ++j) {
          const A *gj = g + (1 + j) * c.rs, *wj = w + (1 + j) * c.rs;
          for (int64_t l = 0; l < m; ++l) {
            const int64_t e = ((o0 + l) * in + i) * nb + j;
            ds[l] += gj[l] * wj[l];
            gsw[e] = T(gj[l] * s[l]);
          }
        }
        if (p.has_scaler)
          for (int64_t l = 0; l < m; ++l) gsc[(o0 + l) * in + i] = T(ds[l]);
      }
    }
  });
}


// The uniform-knot path's knots where it applies (fp32/fp64, every feature's knots uniform; orders >= 2
// with derivatives), else none.
template <typename T, typename A>
std::unique_ptr<UniformKnots<A>> uniform_knots(const KanParams& p, const T* grid, bool deriv) {
  if constexpr (uniform_dtype<T>()) {
    BsplineParams b{};
    b.rows = p.rows, b.in = p.in, b.n_knots = p.n_knots, b.order = p.order, b.n_basis = p.n_basis;
    b.deriv = deriv ? 1 : 0;
    auto u = std::make_unique<UniformKnots<A>>(grid, b);
    if (u->all) return u;
  }
  return nullptr;
}

// The call's knots set on c: its uniform knots where they apply (ud with derivatives: the backward),
// their row-tiled form for fewer features than lanes (locals_by_rows), and the knot-difference
// reciprocals. Owns what c points to: a local of the call, never moved.
template <typename T, typename A>
struct CallKnots {
  std::unique_ptr<UniformKnots<A>> u;
  UniformKnots<A> tiled;
  CallKnots(Ctx<T, A>& c, bool backward) : u(uniform_knots<T, A>(c.p, c.grid, backward)) {
    (backward ? c.ud : c.uv) = u.get();
    if (u && c.p.in > 0 && c.p.in < uint32_t(uniform_lanes<A>())) tiled = u->tiled(c.p.in);
    if (tiled.all) c.ut = &tiled;
    knot_inverses(c);
  }
  CallKnots(const CallKnots&) = delete;
};

template <typename T>
Ctx<T, typename sk_acc<T>::type> make_ctx(const KanParams& p, const TensorView& x, const TensorView& grid,
                                          const TensorView& bw, const TensorView& sw, const TensorView& sc,
                                          const TensorView& work, const KanCpuLayout& lay) {
  using A = typename sk_acc<T>::type;
  A* base = work.ptr<A>();
  return Ctx<T, A>{p,    x.ptr<const T>(), grid.ptr<const T>(), bw.ptr<const T>(), sw.ptr<const T>(),
                   sc.ptr<const T>(), base, base + lay.wt, lay.ns, lay.nq, lay.outp, 0, lay.outc, 0, lay.inc,
                   lay.nq > lay.ns + 1, kLanes<A>, lay.nq * kLanes<A>, lay.nq * lay.outp, nullptr, nullptr};
}

}  // namespace
}  // namespace swisk::cpu
