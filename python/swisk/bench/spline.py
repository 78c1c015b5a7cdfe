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
         grads=("x",), quick=(b <= 1024), devices=("cpu", "cuda", "mps") if b <= 1024 else ("cuda", "mps"))
    for b, f, g in [(1024, 256, 5), (4096, 1024, 16)]
]


def _kan_setup(batch, fin, fout, grid_size, order):
    def setup(device, dtype, gen):
        h = 2.0 / grid_size
        grid = (torch.arange(-order, grid_size + order + 1, dtype=torch.float64) * h - 1).expand(fin, -1)
        x = torch.rand(batch, fin, generator=gen, dtype=torch.float64) * 2.4 - 1.2
        r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64) / fin ** 0.5  # noqa: E731
        a = {"x": x, "base_weight": r(fout, fin), "spline_weight": r(fout, fin, grid_size + order),
             "spline_scaler": r(fout, fin) * fin ** 0.5}
        a = {k: v.to(device, dtype).requires_grad_() for k, v in a.items()}
        return {**a, "grid": grid.contiguous().to(device, dtype), "k": order}
    return setup


def _kan_args(a):
    return a["x"], a["grid"], a["base_weight"], a["spline_weight"], a["spline_scaler"], a["k"]


_KAN_GRADS = ("x", "base_weight", "spline_weight", "spline_scaler")
# CPU rows (with their goals) and GPU rows; flops: the dense-equivalent GEMM, 2·batch·out·in·(G+k+1).
CASES += [
    Case("kan_linear", f"b1024 256->256 G={g} k=3", _kan_setup(1024, 256, 256, g, 3),
         run=lambda a: ops.kan_linear(*_kan_args(a)), reference=lambda a: reference.kan_linear(*_kan_args(a)),
         grads=_KAN_GRADS, flops=2.0 * 1024 * 256 * 256 * (g + 4), devices=("cpu",),
         goal=f"fwd+bwd >= {s}x faster than the reference, <= 1/{m} of its peak memory")
    for g, s, m in [(5, 1.5, 4), (16, 3, 8)]
] + [
    Case("kan_linear", f"b4096 1024->1024 G={g} k=3", _kan_setup(4096, 1024, 1024, g, 3),
         run=lambda a: ops.kan_linear(*_kan_args(a)), reference=lambda a: reference.kan_linear(*_kan_args(a)),
         grads=_KAN_GRADS, flops=2.0 * 4096 * 1024 * 1024 * (g + 4), devices=("cuda", "mps"), quick=(g == 5),
         goal="fwd+bwd >= 3x faster than the reference (H100/H200)")
    for g in (5, 16)
]
