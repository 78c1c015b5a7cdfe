"""Benchmark rows of the B-spline family."""
from __future__ import annotations

import torch

from .. import ops, reference
from .cases import Case


def _basis_setup(batch, features, grid_size, order):
    def setup(device, dtype, gen):
        h = 2.0 / grid_size
        grid = (torch.arange(-order, grid_size + order + 1, dtype=torch.float64) * h - 1).expand(features, -1)
        x = torch.rand(batch, features, generator=gen, dtype=torch.float64) * 2.4 - 1.2
        return {"x": x.to(device, dtype).requires_grad_(), "grid": grid.contiguous().to(device, dtype), "k": order}
    return setup


CASES = [
    Case("bspline_basis", f"b{b} in{f} G={g} k=3", _basis_setup(b, f, g, 3),
         run=lambda a: ops.bspline_basis(a["x"], a["grid"], a["k"]),
         reference=lambda a: reference.bspline_basis(a["x"], a["grid"], a["k"]),
         grads=("x",), quick=(b <= 1024))
    for b, f, g in [(1024, 256, 5), (4096, 1024, 16)]
]
