"""The public ops. Each checks its Python-level arguments, then calls the swisk custom op."""
from __future__ import annotations

import torch

from . import _ops  # noqa: F401  (registers torch.ops.swisk.*)

__all__ = ["bspline_basis"]


def _tensor(op: str, arg: str, t) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"[{op}] {arg}: expected a torch.Tensor, got {type(t).__name__}")
    return t


def _int(op: str, arg: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"[{op}] {arg}: expected an int, got {type(v).__name__}")
    return v


def bspline_basis(x: torch.Tensor, grid: torch.Tensor, spline_order: int = 3) -> torch.Tensor:
    """B-spline bases of x (..., in) on per-feature knots grid (in, n_knots): (..., in, n_basis) with
    n_basis = n_knots - 1 - spline_order. Differentiable in x (grid is treated as a constant).

    Zero outside [grid[:, 0], grid[:, -1]) (±inf too); NaN inputs give NaN bases.
    """
    op = "bspline_basis"
    return torch.ops.swisk.bspline_basis(_tensor(op, "x", x), _tensor(op, "grid", grid), _int(op, "spline_order", spline_order))
