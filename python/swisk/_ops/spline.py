"""The B-spline family's custom ops. Inputs are made contiguous here; outputs are allocated here,
never in C++."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .. import _C
from .._backend import dtype_code, backend_for, call, run_metal_plan, stream_for, view
from .common import DEVICES as _DEVICES, concrete as _concrete, int_arg, prep as _prep, tensor_arg


# ---- bspline_basis -------------------------------------------------------------------------------
def _basis_shape(op, x, grid, spline_order, data=True):
    if _concrete(x, grid):
        return _C.bspline_basis_shape(view(op, "x", x, data), view(op, "grid", grid, data), spline_order,
                                      backend_for(x))
    return (*x.shape, grid.shape[-1] - 1 - spline_order)


@torch.library.custom_op("swisk::bspline_basis", mutates_args=(), device_types=_DEVICES)
def bspline_basis(x: Tensor, grid: Tensor, spline_order: int) -> Tensor:
    x, grid = _prep(x, grid)
    out = torch.empty(_basis_shape("bspline_basis", x, grid, spline_order), dtype=x.dtype, device=x.device)
    call(_C.bspline_basis, [x, grid, out], spline_order)
    return out


@bspline_basis.register_fake
def _(x, grid, spline_order):
    return x.new_empty(_basis_shape("bspline_basis", x, grid, spline_order, data=False))


@torch.library.custom_op("swisk::bspline_basis_backward", mutates_args=(), device_types=_DEVICES)
def bspline_basis_backward(x: Tensor, grid: Tensor, grad_out: Tensor, spline_order: int) -> Tensor:
    x, grid, grad_out = _prep(x, grid, grad_out)
    grad_x = torch.empty_like(x)
    call(_C.bspline_basis_backward, [x, grid, grad_out, grad_x], spline_order)
    return grad_x


@bspline_basis_backward.register_fake
def _(x, grid, grad_out, spline_order):
    return torch.empty_like(x)


def _basis_setup(ctx, inputs, output):
    x, grid, spline_order = inputs
    ctx.save_for_backward(x, grid)
    ctx.spline_order = spline_order


def _basis_backward(ctx, grad):
    x, grid = ctx.saved_tensors
    gx = None
    if ctx.needs_input_grad[0]:
        gx = torch.ops.swisk.bspline_basis_backward(x, grid, grad, ctx.spline_order)
    return gx, None, None


bspline_basis.register_autograd(_basis_backward, setup_context=_basis_setup)


def basis(x: Tensor, grid: Tensor, spline_order: int = 3) -> Tensor:
    """B-spline bases of x (..., in) on per-feature knots grid (in, n_knots): (..., in, n_basis) with
    n_basis = n_knots - 1 - spline_order. Differentiable in x (grid is treated as a constant).

    Zero outside [grid[:, 0], grid[:, -1]) (±inf too); NaN inputs give NaN bases. Knots must be
    finite and strictly increasing (checked for CPU tensors; GPU kernels write NaN for a bad row).
    Under autocast it runs in its input dtype.
    """
    op = "bspline_basis"
    return torch.ops.swisk.bspline_basis(tensor_arg(op, "x", x), tensor_arg(op, "grid", grid),
                                         int_arg(op, "spline_order", spline_order))


# ---- kan_linear -----------------------------------------------------------------------------------
def _kan_call(fn, tensors: list, *scalars) -> None:
    """call() for ops with optional tensors: None is an empty view in C++ and a dummy buffer on MPS."""
    first = tensors[0]
    views = [None if t is None else view(fn.__name__, f"arg{i}", t) for i, t in enumerate(tensors)]
    plan = fn(*views, *scalars, backend_for(first), stream_for(first))
    if plan is not None:
        run_metal_plan(plan, [first.new_zeros(1) if t is None else t for t in tensors])


def _kan_prep(*tensors):
    """_prep, with empty tensors re-made with plain strides (an expanded empty gradient has stride 0)."""
    return [t if t is None or t.numel() else t.new_zeros(t.shape) for t in _prep(*tensors)]


def _kan_shape(op, x, grid, bw, sw, sc, spline_order, data=True):
    if _concrete(x, grid, bw, sw, sc):
        v = lambda name, t: None if t is None else view(op, name, t, data)  # noqa: E731
        return _C.kan_linear_shape(v("x", x), v("grid", grid), v("base_weight", bw), v("spline_weight", sw),
                                   v("spline_scaler", sc), spline_order, backend_for(x))
    return (*x.shape[:-1], sw.shape[0])


def _tf32() -> bool:
    """fp32 may run on the CUDA matrix units as tf32, as torch's matmuls do under this flag."""
    return bool(torch.backends.cuda.matmul.allow_tf32)


def _kan_work(x, sw, spline_order, backward, tf32=False):
    """Scratch the backend asks for: fp32 (fp64 for fp64 inputs), allocated here, never in C++."""
    n = _C.kan_linear_workspace(sw.shape[1], sw.shape[0], sw.shape[2], spline_order, dtype_code(x.dtype),
                                backend_for(x), backward, tf32)
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    return torch.empty(n, dtype=dtype, device=x.device) if n else None


@torch.library.custom_op("swisk::kan_linear", mutates_args=(), device_types=_DEVICES)
def kan_linear_op(x: Tensor, grid: Tensor, base_weight: Optional[Tensor], spline_weight: Tensor,
                  spline_scaler: Optional[Tensor], spline_order: int) -> Tensor:
    x, grid, bw, sw, sc = _kan_prep(x, grid, base_weight, spline_weight, spline_scaler)
    out = torch.empty(_kan_shape("kan_linear", x, grid, bw, sw, sc, spline_order), dtype=x.dtype, device=x.device)
    tf32 = _tf32()
    _kan_call(_C.kan_linear, [x, grid, bw, sw, sc, out, _kan_work(x, sw, spline_order, False, tf32)], spline_order,
              tf32)
    return out


@kan_linear_op.register_fake
def _(x, grid, base_weight, spline_weight, spline_scaler, spline_order):
    shape = _kan_shape("kan_linear", x, grid, base_weight, spline_weight, spline_scaler, spline_order, data=False)
    return x.new_empty(shape)


@torch.library.custom_op("swisk::kan_linear_backward", mutates_args=(), device_types=_DEVICES)
def kan_linear_backward_op(x: Tensor, grid: Tensor, base_weight: Optional[Tensor], spline_weight: Tensor,
                           spline_scaler: Optional[Tensor], grad_out: Tensor,
                           spline_order: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler); an absent argument's is empty."""
    x, grid, bw, sw, sc, gy = _kan_prep(x, grid, base_weight, spline_weight, spline_scaler, grad_out)
    gx, gsw = torch.empty_like(x), torch.empty_like(sw)
    gbw = None if bw is None else torch.empty_like(bw)
    gsc = None if sc is None else torch.empty_like(sc)
    work = _kan_work(x, sw, spline_order, True)
    tensors = [x, grid, bw, sw, sc, gy, gx, gbw, gsw, gsc, work]
    metal = backend_for(x) in ("mps", "metal-emu")  # Metal runs one kernel per call: stage by stage
    for stage in ((0, 1, 2) if metal else (-1,)):
        _kan_call(_C.kan_linear_backward, tensors, spline_order, stage)
    return gx, x.new_empty(0) if gbw is None else gbw, gsw, x.new_empty(0) if gsc is None else gsc


@kan_linear_backward_op.register_fake
def _(x, grid, base_weight, spline_weight, spline_scaler, grad_out, spline_order):
    return (torch.empty_like(x), x.new_empty(0) if base_weight is None else torch.empty_like(base_weight),
            torch.empty_like(spline_weight), x.new_empty(0) if spline_scaler is None else torch.empty_like(spline_scaler))


def _kan_setup(ctx, inputs, output):
    x, grid, bw, sw, sc, spline_order = inputs
    ctx.save_for_backward(x, grid, bw, sw, sc)
    ctx.spline_order = spline_order


def _kan_backward(ctx, grad):
    x, grid, bw, sw, sc = ctx.saved_tensors
    gx, gbw, gsw, gsc = torch.ops.swisk.kan_linear_backward(x, grid, bw, sw, sc, grad, ctx.spline_order)
    need = ctx.needs_input_grad
    return (gx if need[0] else None, None, gbw if need[2] else None, gsw if need[3] else None,
            gsc if need[4] else None, None)


kan_linear_op.register_autograd(_kan_backward, setup_context=_kan_setup)


def kan_linear(x: Tensor, grid: Tensor, base_weight: Optional[Tensor], spline_weight: Tensor,
               spline_scaler: Optional[Tensor] = None, spline_order: int = 3) -> Tensor:
    """Fused efficient-kan layer: silu(x) @ base_weightᵀ + Σ_i Σ_j spline_weight[o,i,j]·spline_scaler[o,i]·B_j(x_i).

    x (..., in); grid (in, n_knots) strictly increasing per feature; base_weight (out, in) or None (no
    base branch); spline_weight (out, in, n_basis) with n_basis = n_knots - 1 - spline_order;
    spline_scaler (out, in) or None. Returns (..., out). The (batch, in, n_basis) basis tensor is never
    materialised; differentiable in x, base_weight, spline_weight and spline_scaler (grid is a constant).
    Under autocast every floating input, the knots included, is cast to the autocast dtype (fp32
    accumulation inside); knots closer than that dtype resolves are then reported as not increasing.
    On CUDA, fp16/bf16 run on the tensor cores, and so does fp32 (as tf32) when
    torch.backends.cuda.matmul.allow_tf32 is set.
    """
    op = "kan_linear"
    x, grid, sw = tensor_arg(op, "x", x), tensor_arg(op, "grid", grid), tensor_arg(op, "spline_weight", spline_weight)
    bw = tensor_arg(op, "base_weight", base_weight, optional=True)
    sc = tensor_arg(op, "spline_scaler", spline_scaler, optional=True)
    dev = x.device.type
    if torch.is_autocast_enabled(dev) and x.is_floating_point():
        dt = torch.get_autocast_dtype(dev)
        x, grid, bw, sw, sc = (None if t is None else t.to(dt) for t in (x, grid, bw, sw, sc))
    return torch.ops.swisk.kan_linear(x, grid, bw, sw, sc, int_arg(op, "spline_order", spline_order))
