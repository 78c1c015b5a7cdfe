// CPU B-spline basis: only order+1 bases are non-zero per input, so the cost is O(order) per value
// plus the (mostly zero) output write.
#include "swisk/ops/bspline.h"

#include <cstring>

#include "dtype_dispatch.h"
#include "parallel.h"

namespace swisk::cpu {

static void basis(const BsplineBasisArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order);
  const int64_t total = int64_t(p.rows) * p.in;
  dispatch_float<true>(a.x.dtype, "bspline_basis", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const T* x = a.x.ptr<const T>();
    const T* grid = a.grid.ptr<const T>();
    T* out = a.out.ptr<T>();
    parallel_for(total, 1024, [&](int64_t lo, int64_t hi) {
      for (int64_t e = lo; e < hi; ++e) {
        const T* g = grid + (e % p.in) * p.n_knots;
        T* o = out + e * p.n_basis;
        auto b = bspline_local<A>(A(x[e]), g, int(p.n_knots), int(p.order), false);
        if (b.span == -2) {
          for (sk_u32 j = 0; j < p.n_basis; ++j) o[j] = T(b.v[0]);
          continue;
        }
        std::memset(static_cast<void*>(o), 0, sizeof(T) * p.n_basis);
        if (b.span < 0) continue;
        for (int r = SWISK_MAX_SPLINE_ORDER - int(p.order); r <= SWISK_MAX_SPLINE_ORDER; ++r) {
          const int j = b.span - SWISK_MAX_SPLINE_ORDER + r;
          if (j >= 0 && j < int(p.n_basis)) o[j] = T(b.v[r]);
        }
      }
    });
  });
}

static void basis_backward(const BsplineBasisBackwardArgs& a) {
  const BsplineParams p = bspline_params(a.x, a.grid, a.order);
  const int64_t total = int64_t(p.rows) * p.in;
  dispatch_float<true>(a.x.dtype, "bspline_basis_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = typename sk_acc<T>::type;
    const T* x = a.x.ptr<const T>();
    const T* grid = a.grid.ptr<const T>();
    const T* go = a.grad_out.ptr<const T>();
    T* gx = a.grad_x.ptr<T>();
    parallel_for(total, 1024, [&](int64_t lo, int64_t hi) {
      for (int64_t e = lo; e < hi; ++e) {
        auto b = bspline_local<A>(A(x[e]), grid + (e % p.in) * p.n_knots, int(p.n_knots), int(p.order), true);
        A acc = b.span == -2 ? b.d[0] : A(0);
        for (int r = SWISK_MAX_SPLINE_ORDER - int(p.order); b.span >= 0 && r <= SWISK_MAX_SPLINE_ORDER; ++r) {
          const int j = b.span - SWISK_MAX_SPLINE_ORDER + r;
          if (j >= 0 && j < int(p.n_basis)) acc += A(go[e * p.n_basis + j]) * b.d[r];
        }
        gx[e] = T(acc);
      }
    });
  });
}

void register_bspline(Registry& r) {
  r.add<BsplineBasisArgs>("bspline_basis", Backend::cpu, &basis);
  r.add<BsplineBasisBackwardArgs>("bspline_basis_backward", Backend::cpu, &basis_backward);
}

}  // namespace swisk::cpu

