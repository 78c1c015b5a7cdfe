"""The B-spline family's custom ops. Inputs are made contiguous here; outputs are allocated here,
never in C++."""
from __future__ import annotations

import torch
from torch import Tensor

from .. import _C
from .._backend import backend_for, call, view
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
