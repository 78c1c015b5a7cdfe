"""The B-spline family: one description per op (C++ validates, Python allocates, C++ launches)."""
from __future__ import annotations

import torch

from .. import _C, reference
from .define import OpSpec, define, invoke, wrapper


def _kan_ref(x, grid, bw, sw, sc, k):
    bw = torch.zeros(sw.shape[:2], dtype=sw.dtype, device=sw.device) if bw is None else bw
    return reference.kan_linear(x, grid, bw, sw, sc, k)


# The backward ops' formulations: vector-Jacobian products of the forward formulations (torch.func,
# so that they nest under autograd and torch.func alike).
def _basis_backward_ref(x, grid, g, k):
    return torch.func.vjp(lambda xx: reference.bspline_basis(xx, grid, k), x)[1](g)[0]


def _kan_backward_ref(x, grid, bw, sw, sc, gy, k):
    present = [t is not None for t in (x, bw, sw, sc)]

    def f(*moving):
        it = iter(moving)
        args = [next(it) if p else None for p in present]
        return _kan_ref(args[0], grid, *args[1:], k)

    grads = iter(torch.func.vjp(f, *(t for t in (x, bw, sw, sc) if t is not None))[1](gy))
    return tuple(next(grads) if p else x.new_zeros(0) for p in present)


# ---- bspline_basis ---------------------------------------------------------------------------------
def _basis_backward(need, saved, scalars, grads):
    x, grid = saved
    gx = None
    if need[0]:
        gx = invoke(bspline_basis_backward_op, x, grid, grads[0], *scalars)
    return gx, None


def _basis_shapes(x, grid, k):
    torch._check(grid.dim() == 2 and grid.shape[0] == x.shape[-1],
                 lambda: "[bspline_basis] grid: must be (in, n_knots) with in = x.shape[-1]")
    torch._check(k >= 0 and grid.shape[1] >= k + 2, lambda: "[bspline_basis] spline_order: too few knots")
    return [(*x.shape, grid.shape[1] - 1 - k)]


def _kan_shapes(x, grid, bw, sw, sc, k):
    torch._check(grid.dim() == 2 and grid.shape[0] == x.shape[-1],
                 lambda: "[kan_linear] grid: must be (in, n_knots) with in = x.shape[-1]")
    torch._check(sw.dim() == 3 and sw.shape[1] == x.shape[-1] and sw.shape[2] == grid.shape[1] - 1 - k,
                 lambda: "[kan_linear] spline_weight: must be (out, in, n_basis)")
    for name, t in (("base_weight", bw), ("spline_scaler", sc)):
        if t is not None:
            torch._check(t.dim() == 2 and t.shape[0] == sw.shape[0] and t.shape[1] == x.shape[-1],
                         lambda: f"[kan_linear] {name}: must be (out, in)")
    return [(*x.shape[:-1], sw.shape[0])]


BASIS = OpSpec(
    name="bspline_basis", inputs=("x", "grid"), scalars=(("spline_order", int),), outputs=("out",),
    prepare=_C.bspline_basis_prepare, backward=_basis_backward, reference=reference.bspline_basis,
    row_outputs=("out",),
    fake_shapes=_basis_shapes, defaults={"spline_order": 3},
    doc="""B-spline bases of x (..., in) on per-feature knots grid (in, n_knots): (..., in, n_basis) with
    n_basis = n_knots - 1 - spline_order. Differentiable in x (grid is treated as a constant).

    Zero outside [grid[:, 0], grid[:, -1]) (±inf too); NaN inputs give NaN bases. Knots must be
    finite and strictly increasing (checked for CPU tensors; GPU kernels write NaN for a bad row).
    Under autocast it runs in its input dtype.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices or shapes.
    """)

BASIS_BACKWARD = OpSpec(
    name="bspline_basis_backward", inputs=("x", "grid", "grad_out"), scalars=(("spline_order", int),),
    outputs=("grad_x",), prepare=_C.bspline_basis_backward_prepare, reference=_basis_backward_ref,
    row_outputs=("grad_x",),
    fake_shapes=lambda x, grid, g, k: [tuple(x.shape)])

bspline_basis_op = define(BASIS)
bspline_basis_backward_op = define(BASIS_BACKWARD)
basis = wrapper(BASIS, bspline_basis_op)


# ---- kan_linear ------------------------------------------------------------------------------------
def _tf32(backend: str) -> tuple:
    """fp32 may run on the CUDA matrix units as tf32, as torch's matmuls do under this flag."""
    return (backend in ("cuda", "cuda-emu") and bool(torch.backends.cuda.matmul.allow_tf32),)


def _kan_backward(need, saved, scalars, grads):
    x, grid, bw, sw, sc = saved
    gx, gbw, gsw, gsc = invoke(kan_linear_backward_op, x, grid, bw, sw, sc, grads[0], *scalars)
    return (gx if need[0] else None, None, gbw if need[2] else None, gsw if need[3] else None,
            gsc if need[4] else None)


KAN_LINEAR = OpSpec(
    name="kan_linear", inputs=("x", "grid", "base_weight?", "spline_weight", "spline_scaler?"),
    scalars=(("spline_order", int),), outputs=("out",), prepare=_C.kan_linear_prepare, extra=_tf32,
    backward=_kan_backward, reference=_kan_ref, autocast="lower", row_outputs=("out",),
    fake_shapes=_kan_shapes,
    defaults={"spline_scaler": None, "spline_order": 3},
    doc="""Fused efficient-kan layer: silu(x) @ base_weightᵀ + Σ_i Σ_j spline_weight[o,i,j]·spline_scaler[o,i]·B_j(x_i).

    Args:
        x: (..., in).
        grid: (in, n_knots), strictly increasing per feature.
        base_weight: (out, in), or None (no base branch).
        spline_weight: (out, in, n_basis) with n_basis = n_knots - 1 - spline_order.
        spline_scaler: (out, in), or None.
        spline_order: the B-spline order k >= 0.

    Returns:
        (..., out). The (batch, in, n_basis) basis tensor is never materialised; differentiable in x,
        base_weight, spline_weight and spline_scaler (grid is a constant).

    Under autocast every floating input, the knots included, is cast to the autocast dtype (fp32
    accumulation inside); knots closer than that dtype resolves are then reported as not increasing.
    On CUDA, fp16/bf16 run on the tensor cores, and so does fp32 (as tf32) when
    torch.backends.cuda.matmul.allow_tf32 is set.

    Derivatives: first-order gradients run on swisk's kernels. Second derivatives (the backward's own
    backward: gradient penalties, PINN losses, hessians) and forward-mode tangents (jvp, jacfwd) are
    computed from the plain-torch formulation, which builds the (batch, in, n_basis) basis tensor, as
    efficient-kan does.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices, shapes or knots.
    """)

KAN_LINEAR_BACKWARD = OpSpec(
    name="kan_linear_backward",
    inputs=("x", "grid", "base_weight?", "spline_weight", "spline_scaler?", "grad_out"),
    scalars=(("spline_order", int),),
    outputs=("grad_x", "grad_base_weight", "grad_spline_weight", "grad_spline_scaler"),
    prepare=_C.kan_linear_backward_prepare, reference=_kan_backward_ref, row_outputs=("grad_x",),
    fake_shapes=lambda x, grid, bw, sw, sc, g, k: [tuple(x.shape), (0,) if bw is None else tuple(bw.shape),
                                                   tuple(sw.shape), (0,) if sc is None else tuple(sc.shape)])

kan_linear_op = define(KAN_LINEAR)
kan_linear_backward_op = define(KAN_LINEAR_BACKWARD)
kan_linear = wrapper(KAN_LINEAR, kan_linear_op)
