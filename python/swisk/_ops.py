"""torch.library registrations: every kernel as a custom op (namespace swisk) with a fake kernel
and autograd. Inputs are made contiguous here; outputs are allocated here, never in C++."""
from __future__ import annotations

import torch
from torch import Tensor

from . import _C
from ._backend import backend_for, call, view

_DEVICES = ("cpu", "cuda", "mps")


def _concrete(*tensors) -> bool:
    return all(isinstance(s, int) for t in tensors for s in t.shape)


def _prep(*tensors):
    return [t.detach().contiguous() for t in tensors]


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
