// CPU fused KAN linear, backward (cpu/kan.cpp has the forward and the layout): a thread per feature
// (it owns the feature's gradient rows: deterministic, no atomics). The rows of a tile are grouped by
// knot interval, so in a group the order+2 weight and gradient rows are fixed: dx from dot products of
// gy with those rows, the weight gradient summed in registers. Chunk by chunk over features
// (kan_repack.h); a few rows (fp32/fp64) skip the repacking (kan_direct.h).
#include "swisk/ops/kan.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <vector>

#include "bspline_uniform.h"
#include "clones.h"
#include "dtype_dispatch.h"
#include "kan_direct.h"
#include "kan_locals.h"
#include "kan_repack.h"
#include "parallel.h"
#include "vec_math.h"

namespace swisk::cpu {
namespace {

constexpr int64_t kTileRows = 512;  // backward: most rows grouped by interval together
constexpr int64_t kLocalBytes = 8 << 20;  // backward: the locals of a tile of rows

// Rows (at most the kernels' register budget) of one interval group: res[g] = sum_o gy[g][o] ·
// (d_0 w_0[o] + sc[o] sum_q d_q w_q[o]), as K+2 dot products per row in vector lanes (w_0 = w0, w_q =
// ws + (q-1)·rs: the unscaled spline rows).
template <int K, int G, typename A>
SK_VEC_INLINE void dx_rows(const A* w0, const A* ws, const A* sc, int64_t rs, int64_t vs, int64_t out,
                           const A* const* gy, const Local<K, A, true>* const* l, A* res) {
  using V = VW<A>;
  constexpr int64_t L = kLanes<A>;
  V acc[G][K + 2];
  for (int g = 0; g < G; ++g)
    for (int q = 0; q < K + 2; ++q) acc[g][q] = V{};
  int64_t o = 0;
  for (int64_t at = 0; o + L <= out; o += L, at += vs) {
    V w[K + 2];
    w[0] = vload(w0 + at);
    for (int q = 0; q <= K; ++q) w[q + 1] = vload(ws + q * rs + at);
    const V s = vload(sc + at);
    for (int g = 0; g < G; ++g) {
      const V yv = vload(gy[g] + o), ys = yv * s;
      acc[g][0] += w[0] * yv;
      for (int q = 1; q < K + 2; ++q) acc[g][q] += w[q] * ys;
    }
  }
  for (int g = 0; g < G; ++g) {  // the d_q weigh the lanes before one horizontal sum per row
    V t = V{};
    for (int q = 0; q < K + 2; ++q) t += l[g]->d[q] * acc[g][q];
    A s = vsum<A>(t);
    for (int64_t e = o; e < out; ++e) {
      const int64_t at = e / L * vs + e % L;
      A dot = A(0);
      for (int q = 0; q <= K; ++q) dot += l[g]->d[q + 1] * ws[q * rs + at];
      s += (l[g]->d[0] * w0[at] + sc[at] * dot) * gy[g][e];
    }
    res[g] = s;
  }
}

// The gradient rows g0 (silu's) and gs .. gs + K·rs, on outputs [o, o + NV·L), += sum over the
// group's m rows of c_q · gy[r]: summed in registers, one load and store per group.
template <int K, int NV, typename A>
SK_VEC_INLINE void dw_tile(A* g0, A* gs, int64_t rs, int64_t vs, const A* const* gy,
                           const Local<K, A, true>* const* l, int64_t m, int64_t o) {
  using V = VW<A>;
  constexpr int64_t L = kLanes<A>;
  V a[K + 2][NV];
  g0 += o / L * vs, gs += o / L * vs;
  for (int v = 0; v < NV; ++v) {
    a[0][v] = vload(g0 + v * vs);
    for (int q = 0; q <= K; ++q) a[q + 1][v] = vload(gs + q * rs + v * vs);
  }
  for (int64_t r = 0; r < m; ++r) {
    V yv[NV];
    for (int v = 0; v < NV; ++v) yv[v] = vload(gy[r] + o + v * L);
    for (int q = 0; q < K + 2; ++q)
      for (int v = 0; v < NV; ++v) a[q][v] += l[r]->c[q] * yv[v];
  }
  for (int v = 0; v < NV; ++v) {
    vstore(g0 + v * vs, a[0][v]);
    for (int q = 0; q <= K; ++q) vstore(gs + q * rs + v * vs, a[q + 1][v]);
  }
}

// Scratch of one backward thread: the tile's rows grouped by interval.
template <int K, typename A>
struct BackScratch {
  std::vector<const Local<K, A, true>*> lp;
  std::vector<const A*> gp;
  std::vector<int64_t> rows, start;
};

// Feature i (of the chunk) over rows [n0, n0 + nn) with their locals loc: gx[:, i] (gx null: not
// needed) and feature i's gradient rows (gwt null: not needed).
// Regs: the clone's vector registers (vec_registers), which size the register tiles.
template <int K, int Regs, typename T, typename A>
void backward_feature(const Ctx<T, A>& c, const A* gy, T* gx, A* gwt, int64_t i, int64_t n0, int64_t nn,
                      const Local<K, A, true>* loc, BackScratch<K, A>& s) {
  const KanParams& p = c.p;
  constexpr int64_t L = kLanes<A>;
  constexpr int G = (K + 2) * 4 + K + 5 <= Regs ? 4 : (K + 2) * 2 + K + 5 <= Regs ? 2 : 1;  // rows per dx_rows
  constexpr int NV = (K + 2) * 4 + 4 <= Regs ? 4 : (K + 2) * 2 + 2 <= Regs ? 2 : 1;         // vectors per dw_tile
  constexpr int64_t rs = L;  // Ctx::rs, a constant to the inlined loops' addressing
  const int64_t vs = c.vs, groups = c.ns + 1 - K;  // row: 1 .. ns - K
  s.lp.resize(nn), s.gp.resize(nn), s.rows.resize(nn), s.start.assign(groups + 1, 0);
  for (int64_t r = 0; r < nn; ++r) ++s.start[loc[r].row];
  for (int64_t b = 1; b <= groups; ++b) s.start[b] += s.start[b - 1];  // start[b]: end of group b
  for (int64_t r = nn - 1; r >= 0; --r) {
    const int64_t at = --s.start[loc[r].row];
    s.lp[at] = &loc[r], s.rows[at] = n0 + r, s.gp[at] = gy + (n0 + r) * p.out;
  }
  const A *w0 = c.at(c.wt, i - c.i0, 0), *sc = c.at(c.wt, i - c.i0, 1 + c.ns);
  for (int64_t b = 0; b < groups; ++b) {
    const int64_t lo = s.start[b], hi = s.start[b + 1];
    if (lo == hi) continue;
    const A* ws = c.at(c.wt, i - c.i0, b);
    int64_t r = gx ? lo : hi;
    A res[G];
    for (; r + G <= hi; r += G) {
      dx_rows<K, G>(w0, ws, sc, rs, vs, c.oc, &s.gp[r], &s.lp[r], res);
      for (int g = 0; g < G; ++g) gx[s.rows[r + g] * p.in + i] = T(res[g]);
    }
    for (; r < hi; ++r) {
      dx_rows<K, 1>(w0, ws, sc, rs, vs, c.oc, &s.gp[r], &s.lp[r], res);
      gx[s.rows[r] * p.in + i] = T(res[0]);
    }
    if (gwt == nullptr) continue;
    A *g0 = c.at(gwt, i - c.i0, 0), *gs = c.at(gwt, i - c.i0, b);
    int64_t o = 0;
    for (; o + NV * L <= c.oc; o += NV * L) dw_tile<K, NV>(g0, gs, rs, vs, &s.gp[lo], &s.lp[lo], hi - lo, o);
    for (; o + L <= c.oc; o += L) dw_tile<K, 1>(g0, gs, rs, vs, &s.gp[lo], &s.lp[lo], hi - lo, o);
    for (int64_t e = lo; e < hi; ++e)
      for (int64_t t = o; t < c.oc; ++t) {
        const A gv = s.gp[e][t];
        const int64_t at = t / L * vs + t % L;
        g0[at] += s.lp[e]->c[0] * gv;
        for (int q = 0; q <= K; ++q) gs[q * rs + at] += s.lp[e]->c[q + 1] * gv;
      }
  }
}

// backward_feature / backward_locals for this CPU: one clone per x86-64 ISA level (cpu/clones.h),
// everything they call flattened into them.
template <int K, int Regs, typename T, typename A>
SK_CLONES_FLAT void backward_feature_any(const Ctx<T, A>& c, const A* gy, T* gx, A* gwt, int64_t i, int64_t n0,
                                         int64_t nn, const Local<K, A, true>* loc, BackScratch<K, A>& s) {
  backward_feature<K, Regs>(c, gy, gx, gwt, i, n0, nn, loc, s);
}

template <int K, bool ByRows, typename T, typename A>
SK_CLONES_FLAT void backward_locals_any(const Ctx<T, A>& c, int64_t n0, int64_t nn, int64_t lo, int64_t hi,
                                        Local<K, A, true>* loc, A* xa, A* silu, A* dsilu, bool dx) {
  backward_locals<K, ByRows>(c, n0, nn, lo, hi, loc, xa, silu, dsilu, dx);
}

// A NaN x[n, i] reaches every basis of feature i in the formulation (Cox–de Boor's products), so the
// spline weight gradient of that feature is NaN for every output and basis; the kernels reached the
// window's bases alone.
template <typename T>
void nan_features(const KanLinearBackwardArgs& a, const KanParams& p) {
  if (!a.need_weights || p.out == 0 || p.rows == 0) return;
  using A = typename sk_acc<T>::type;
  const T* x = a.x.ptr<const T>();
  std::vector<char> bad(p.in, 0);
  bool any = false;
  for (int64_t e = 0; e < int64_t(p.rows) * p.in; ++e) {
    const A v = A(x[e]);
    if (v != v) bad[e % p.in] = 1, any = true;
  }
  if (!any) return;
  const T nan = T(std::numeric_limits<float>::quiet_NaN());
  T* gsw = a.grad_spline_weight.ptr<T>();
  for (int64_t o = 0; o < p.out; ++o)
    for (int64_t i = 0; i < p.in; ++i)
      if (bad[i]) std::fill(gsw + (o * p.in + i) * p.n_basis, gsw + (o * p.in + i + 1) * p.n_basis, nan);
}

}  // namespace

inline namespace SK_VEC_ABI {
void kan_linear_backward(const KanLinearBackwardArgs& a) {
  if (!a.need_x && !a.need_weights) return;
  const KanParams p = kan_params(a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.order);
  const KanCpuLayout lay = kan_cpu_layout(p.in, p.out, p.n_basis, a.order, a.x.dtype, true);
  dispatch_float<true>(a.x.dtype, "kan_linear_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    auto c = make_ctx<T>(p, a.x, a.grid, a.base_weight, a.spline_weight, a.spline_scaler, a.work, lay);
    const CallKnots<T, A> knots(c, true);
    const T* gy_t = a.grad_out.ptr<const T>();
    if constexpr (std::is_same_v<T, A>) {
      if (kan_cpu_direct(p.rows, a.x.dtype, true)) {
        dispatch_order(a.order, [&](auto k) { direct_backward<k()>(c, a, gy_t); });
        return nan_features<T>(a, p);
      }
    }
    A* gwt = a.need_weights ? a.work.ptr<A>() + lay.gwt : nullptr;  // wt is read by dx and by the unpacking
    std::vector<A> gy_acc;  // fp16/bf16: gy in the accumulation type, O(batch·out)
    const A* gy;
    if constexpr (std::is_same_v<T, A>) {
      gy = gy_t;
    } else {
      gy_acc.resize(int64_t(p.rows) * p.out);
      for (size_t e = 0; e < gy_acc.size(); ++e) gy_acc[e] = A(gy_t[e]);
      gy = gy_acc.data();
    }
    T* gx = a.need_x ? a.grad_x.ptr<T>() : nullptr;
    const bool wide = vec_registers() >= 32;
    dispatch_order(a.order, [&](auto k) {
      using Loc = Local<k(), A, true>;
      // Rows per tile: their locals for the chunk's features in about kLocalBytes.
      const int64_t per_tile_row = int64_t(sizeof(Loc)) * std::max<int64_t>(1, lay.inc);
      const int64_t tile = std::max<int64_t>(1, std::min<int64_t>(kTileRows, kLocalBytes / per_tile_row));
      std::vector<Loc> loc(std::min<int64_t>(tile, p.rows) * lay.inc);
      const int64_t padded = (p.in + kFeats - 1) / kFeats * kFeats;
      for_chunks(c, lay, [&] {
        pack(c);
        const int64_t per_row = c.ic * (k() + 1) * (k() + 4);
        const int64_t per_feature = int64_t(p.rows) * p.out * (k() + 2) * 2;
        if (p.rows == 0 && gwt) std::fill(gwt, c.at(gwt, c.ic, 0), A(0));
        for (int64_t n0 = 0; n0 < p.rows; n0 += tile) {
          const int64_t nn = std::min<int64_t>(tile, p.rows - n0);
          parallel_for(nn, work_grain(4, per_row), [&](int64_t lo, int64_t hi) {
            const int64_t each = c.ut ? std::max(padded, kRows * p.in + kFeats) : padded;  // locals_by_rows
            std::vector<A> buf(3 * each);
            A *xa = buf.data(), *silu = xa + each, *dsilu = silu + each;
            if constexpr (uniform_dtype<T>()) {  // c.ut: uniform knots, fp32/fp64 only
              if (c.ut && c.ic == p.in)
                return backward_locals_any<k(), true>(c, n0, nn, lo, hi, loc.data(), xa, silu, dsilu, gx != nullptr);
            }
            backward_locals_any<k(), false>(c, n0, nn, lo, hi, loc.data(), xa, silu, dsilu, gx != nullptr);
          });
          parallel_for(c.ic, work_grain(1, per_feature), [&](int64_t lo, int64_t hi) {
            BackScratch<k(), A> s;
            for (int64_t f = lo; f < hi; ++f) {
              if (n0 == 0 && gwt) std::fill(c.at(gwt, f, 0), c.at(gwt, f + 1, 0), A(0));  // by the thread that sums it
              if (wide)
                backward_feature_any<k(), 32>(c, gy, gx, gwt, c.i0 + f, n0, nn, loc.data() + f * nn, s);
              else
                backward_feature_any<k(), 16>(c, gy, gx, gwt, c.i0 + f, n0, nn, loc.data() + f * nn, s);
            }
          });
        }
        if (gwt) unpack_chunk(c, a, gwt);
      });
    });
    nan_features<T>(a, p);
  });
}

}  // inline namespace SK_VEC_ABI
}  // namespace swisk::cpu
