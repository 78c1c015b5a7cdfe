"""The B-spline family: one description per op (C++ validates, Python allocates, C++ launches)."""
from __future__ import annotations

import torch

from .. import _C, reference
from . import kan_gemm, routes
from .. import _backend
from .define import define, invoke, wrapper
from .run import OpSpec, _Prepared, _run, hold, recording, take


def _kan_ref(x, grid, bw, sw, sc, k):
    return reference.kan_linear(x, grid, bw, sw, sc, k)


def vjp_through(forward):
    """A KAN backward (x, grid, bw, sw, sc, gy, *scalars, need_x, need_weights) -> (grad_x,
    grad_base_weight, grad_spline_weight, grad_spline_scaler) as the vector-Jacobian product of a
    differentiable forward(x, grid, bw, sw, sc, *scalars); absent weights and unneeded gradients get (0,)."""
    def backward(x, grid, bw, sw, sc, gy, *scalars):
        *scalars, need_x, need_weights = scalars
        needed = (need_x, need_weights, need_weights, need_weights)
        moving = [t is not None and n for t, n in zip((x, bw, sw, sc), needed)]

        def f(*ts):
            it = iter(ts)
            args = [next(it) if m else t for t, m in zip((x, bw, sw, sc), moving)]
            return forward(args[0], grid, *args[1:], *scalars)

        if not any(moving):
            return tuple(x.new_zeros(0) for _ in moving)
        grads = iter(torch.func.vjp(f, *(t for t, m in zip((x, bw, sw, sc), moving) if m))[1](gy))
        return tuple(next(grads) if m else x.new_zeros(0) for m in moving)
    return backward


_kan_backward_ref = vjp_through(_kan_ref)


def _kan_backward_by_kernels(x, grid, bw, sw, sc, gy, k, need_x=True, need_weights=True):
    """kan_linear's backward written with swisk's expansion ops and torch's GEMMs, differentiable to any
    order: what its second derivatives differentiate. Holds (batch, width) operands, width =
    in·(n_basis + 1), where the plain-torch formulation holds several (batch, in, n_basis) tensors."""
    out_f, in_f, nb = sw.shape
    base = bw is not None
    x2, gy2 = x.reshape(-1, in_f), gy.reshape(-1, out_f)
    none = x.new_zeros(0)
    gx, gbw, gsw, gsc = none, none, none, none
    if need_x:
        scaled = sw if sc is None else sw * sc.unsqueeze(-1)
        w = torch.cat([bw, scaled.reshape(out_f, -1)], 1) if base else scaled.reshape(out_f, -1)
        gx = invoke(kan_contract_op, x2.contiguous(), grid, (gy2 @ w).contiguous(), k, 1, base).reshape(x.shape)
    if need_weights:
        gw = gy2.t() @ invoke(kan_expand_op, x2.contiguous(), grid, k, 0, base)
        gsp = gw[:, in_f if base else 0:].reshape(out_f, in_f, nb)
        gbw = gw[:, :in_f] if base else none
        gsw = gsp if sc is None else gsp * sc.unsqueeze(-1)
        gsc = (gsp * sw).sum(-1) if sc is not None else none
    return gx, gbw, gsw, gsc


# ---- the expansion: bspline_basis, kan_expand and their contraction (one kernel pair) ----------------
def _expand_shapes(name, per_feature):
    def shapes(x, grid, k, m, base=False):
        torch._check(grid.dim() == 2 and grid.shape[0] == x.shape[-1],
                     lambda: f"[{name}] grid: must be (in, n_knots) with in = x.shape[-1]")
        torch._check(k >= 0 and grid.shape[1] >= k + 2, lambda: f"[{name}] spline_order: too few knots")
        nb = grid.shape[1] - 1 - k
        if per_feature:
            return [(*x.shape, nb)]
        return [(*x.shape[:-1], (x.shape[-1] if base else 0) + x.shape[-1] * nb)]
    return shapes


def _basis_backward(need, saved, scalars, grads):
    x, grid = saved
    k, m = scalars
    if not need[0]:
        return None, None
    g = grads[0].reshape(*x.shape[:-1], x.shape[-1] * grads[0].shape[-1])
    return invoke(kan_contract_op, x, grid, g.contiguous(), k, m + 1, False), None


def _spread(u, width, base):
    """(..., in) -> (..., width): each feature's value on its columns of the expanded layout."""
    in_f = u.shape[-1]
    nb = (width - (in_f if base else 0)) // max(in_f, 1)
    rep = u.repeat_interleave(nb, -1)
    return torch.cat([u, rep], -1) if base else rep


def _contract_backward(need, saved, scalars, grads):
    """contract_m(x, G) = sum over each feature's columns of G·E_m(x): d/dG = E_m(x)·u spread over the
    columns, d/dx = u·contract_{m+1}(x, G). Both swisk ops: differentiable again, to any order."""
    x, grid, g = saved
    k, m, base = scalars
    u = grads[0].contiguous()
    gx = gg = None
    if need[0]:
        gx = u * invoke(kan_contract_op, x, grid, g, k, m + 1, base)
    if need[2]:
        gg = invoke(kan_expand_op, x, grid, k, m, base) * _spread(u, g.shape[-1], base)
    return gx, None, gg


def _expand_backward(need, saved, scalars, grads):
    x, grid = saved
    k, m, base = scalars
    if not need[0]:
        return None, None
    return invoke(kan_contract_op, x, grid, grads[0].contiguous(), k, m + 1, base), None


BASIS = OpSpec(
    name="bspline_basis", inputs=("x", "grid"), scalars=(("spline_order", int), ("derivative", int)),
    outputs=("out",), prepare=_C.bspline_basis_prepare, backward=_basis_backward,
    reference=reference.bspline_basis, row_outputs=("out",), fake_shapes=_expand_shapes("bspline_basis", True),
    defaults={"spline_order": 3, "derivative": 0},
    doc="""B-spline bases of x (..., in) on per-feature knots grid (in, n_knots): (..., in, n_basis) with
    n_basis = n_knots - 1 - spline_order; with derivative m > 0 their m-th derivatives in x (exactly
    zero past spline_order). Differentiable in x to any order by the kernels; in grid (the knots)
    through the plain-torch formulation, which builds its basis tensors (as every op taking grid).

    Zero outside [grid[:, 0], grid[:, -1]) (±inf too); NaN inputs give NaN bases. Knots must be
    finite and strictly increasing (checked for CPU tensors; GPU kernels write NaN for a bad row).
    spline_order: up to 63 on CPU, 15 on GPUs. Under autocast it runs in its input dtype.

    Args:
        x: (..., in) floating tensor.
        grid: (in, n_knots) knots per feature, same dtype and device as x.
        spline_order: the splines' degree k (n_basis = n_knots - 1 - k).
        derivative: m, the order of the derivative in x (0: the bases themselves).

    Returns:
        (..., in, n_basis) tensor in x's dtype.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices or shapes.
    """)

EXPAND = OpSpec(
    name="kan_expand", inputs=("x", "grid"),
    scalars=(("spline_order", int), ("derivative", int), ("base", bool)), outputs=("out",),
    prepare=_C.kan_expand_prepare, backward=_expand_backward, reference=reference.kan_expand,
    row_outputs=("out",), fake_shapes=_expand_shapes("kan_expand", False),
    defaults={"spline_order": 3, "derivative": 0, "base": True},
    doc="""The KAN layer's A-operand: (..., in) -> (..., base·in + in·n_basis) holding silu^(m)(x) in the
    first in columns (when base) and then B^(m)_j(x_i) at column base·in + i·n_basis + j; so that
    kan_linear(x, ...) = kan_expand(x, grid, k) @ [base_weight | spline_weight·spline_scaler]ᵀ.
    Differentiable in x to any order; in grid through the plain-torch formulation (as bspline_basis).
    derivative: at most 8 with base.

    Args:
        x: (..., in) floating tensor.
        grid: (in, n_knots) knots per feature.
        spline_order: the splines' degree k.
        derivative: m, the order of the derivative in x of every column.
        base: whether the first in columns hold silu^(m)(x).

    Returns:
        (..., base·in + in·n_basis) tensor in x's dtype.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices or shapes.
    """)

CONTRACT = OpSpec(
    name="kan_contract", inputs=("x", "grid", "grad"),
    scalars=(("spline_order", int), ("derivative", int), ("base", bool)), outputs=("grad_x",),
    prepare=_C.kan_contract_prepare, backward=_contract_backward, reference=reference.kan_contract,
    row_outputs=("grad_x",),
    fake_shapes=lambda x, grid, g, k, m, base: [tuple(x.shape)])

bspline_basis_op = define(BASIS)
kan_expand_op = define(EXPAND)
kan_contract_op = define(CONTRACT)
basis = wrapper(BASIS, bspline_basis_op)
expand = wrapper(EXPAND, kan_expand_op)


def _expand_into(x, grid, k, m, base, out):
    _run(EXPAND, kan_expand_op._swisk_prepared, (x, grid, k, m, base), [out])


def _contract_into(x, grid, g, k, m, base, out):
    _run(CONTRACT, kan_contract_op._swisk_prepared, (x, grid, g, k, m, base), [out])


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


# ---- kan_linear ------------------------------------------------------------------------------------
def gradient_shapes(x, bw, sw, sc, need_x, need_weights):
    """A KAN backward's output shapes (C++ kan_gradient_shapes, for symbolic sizes): each argument's
    shape, or (0,) for an absent argument or a gradient not asked for."""
    needs = (need_x, need_weights, need_weights, need_weights)
    return [tuple(t.shape) if t is not None and n else (0,) for t, n in zip((x, bw, sw, sc), needs)]



_CUDA_BACKENDS = ("cuda", "cuda-emu")


def _route(backend: str, tensors, scalars, differentiated: bool) -> tuple:
    """(tf32, gemm): fp32 may run on the CUDA matrix units as tf32, as torch's matmuls do under this
    flag; gemm: the call takes the GEMM route (routes.py), prepare then validates only."""
    x, sw = tensors[0], tensors[3]
    tf32 = backend in _CUDA_BACKENDS and bool(torch.backends.cuda.matmul.allow_tf32)
    if sw.dim() != 3 or x.dim() == 0:
        return tf32, False
    in_f = x.shape[-1]
    rows = x.numel() // in_f if in_f else 0
    route = routes.kan_route(backend, rows, in_f, sw.shape[0], sw.shape[2], scalars[0], differentiated, x.dtype)
    return tf32, route == "gemm"


def _route_key(tensors):
    sw = tensors[3]
    return id(sw), sw._version, tuple(sw.shape), tuple(tensors[0].shape)


def _forward_route(backend: str, tensors, scalars) -> tuple:
    """The forward's route; a recorded forward leaves it for its backward, which then takes the same
    route whatever the settings when it runs (swisk.config.using around the forward alone)."""
    differentiated = recording()
    tf32, gemm = _route(backend, tensors, scalars, differentiated)
    if differentiated:
        hold(tensors[3], "route", _route_key(tensors), gemm)
    return tf32, gemm


def _backward_route(backend: str, tensors, scalars) -> tuple:
    held = take(tensors[3], "route", _route_key(tensors))
    return (held,) if held is not None else _route(backend, tensors, scalars, True)[1:]


def _kan_gemm(tensors, scalars):
    x, grid, bw, sw, sc = tensors
    return kan_gemm.forward(_expand_into, x, grid, bw, sw, sc, scalars[0])


def _kan_gemm_backward(tensors, scalars):
    x, grid, bw, sw, sc, gy = tensors
    unpack = _unpack_into if _backend.backend_for(x) == "cpu" else None
    return kan_gemm.backward(_expand_into, _contract_into, x, grid, bw, sw, sc, gy, *scalars, unpack=unpack)


# The CPU's unpacking of the spline-weight gradient (one pass, no temporary): an internal step of the
# GEMM route's backward, not an op of its own (GPUs do it with torch's elementwise kernels).
UNPACK = OpSpec(
    name="kan_unpack", inputs=("x", "spline_weight", "spline_scaler"), scalars=(),
    outputs=("grad_spline_weight", "grad_spline_scaler"), prepare=_C.kan_unpack_prepare,
    reference=lambda g, sw, sc: (g * sc.unsqueeze(-1), (g * sw).sum(-1)),
    fake_shapes=lambda g, sw, sc: [tuple(g.shape), tuple(g.shape[:2])])
_UNPACK = _Prepared(UNPACK)


def _unpack_into(g, sw, sc, gsw, gsc):
    _run(UNPACK, _UNPACK, (g, sw, sc), [gsw, gsc])


def _kan_backward(need, saved, scalars, grads):
    x, grid, bw, sw, sc = saved
    gx, gbw, gsw, gsc = invoke(kan_linear_backward_op, x, grid, bw, sw, sc, grads[0], *scalars, bool(need[0]),
                               any(need[2:]))
    return (gx if need[0] else None, None, gbw if need[2] else None, gsw if need[3] else None,
            gsc if need[4] else None)


KAN_LINEAR = OpSpec(
    name="kan_linear", inputs=("x", "grid", "base_weight?", "spline_weight", "spline_scaler?"),
    scalars=(("spline_order", int),), outputs=("out",), prepare=_C.kan_linear_prepare, extra=_forward_route,
    composite=_kan_gemm,
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
        base_weight, spline_weight and spline_scaler on the kernels, in grid through the plain-torch
        formulation (which builds the basis tensor).

    Under autocast every floating input, the knots included, is cast to the autocast dtype (fp32
    accumulation inside); knots closer than that dtype resolves are then reported as not increasing.
    On CUDA, fp16/bf16 run on the tensor cores, and so does fp32 (as tf32) when
    torch.backends.cuda.matmul.allow_tf32 is set.

    Derivatives of every order: gradients on the route's kernels, only those autograd asks for (no
    grad_x for an input that needs none, as in a network's first layer; none for frozen weights);
    second and higher derivatives (the backward's own backward: gradient penalties, PINN losses such
    as u_xx and its gradient in the weights, hessians) on swisk's expansion kernels (kan_expand /
    kan_contract with derivative orders) and torch's GEMMs, holding (batch, in·(n_basis+1)) operands.
    Forward-mode tangents (jvp, jacfwd) come from the plain-torch formulation, which builds the
    (batch, in, n_basis) basis tensor.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices, shapes or knots.
    """)

KAN_LINEAR_BACKWARD = OpSpec(
    name="kan_linear_backward",
    inputs=("x", "grid", "base_weight?", "spline_weight", "spline_scaler?", "grad_out"),
    scalars=(("spline_order", int), ("need_x", bool), ("need_weights", bool)),
    outputs=("grad_x", "grad_base_weight", "grad_spline_weight", "grad_spline_scaler"),
    prepare=_C.kan_linear_backward_prepare, extra=_backward_route, composite=_kan_gemm_backward,
    reference=_kan_backward_ref, derivatives=_kan_backward_by_kernels, row_outputs=("grad_x",),
    fake_shapes=lambda x, grid, bw, sw, sc, g, k, need_x, need_w: gradient_shapes(x, bw, sw, sc, need_x, need_w))

kan_linear_op = define(KAN_LINEAR)
kan_linear_backward_op = define(KAN_LINEAR_BACKWARD)
kan_linear = wrapper(KAN_LINEAR, kan_linear_op)
