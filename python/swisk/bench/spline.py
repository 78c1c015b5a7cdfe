"""Benchmark rows of the B-spline family."""
from __future__ import annotations

import torch

from .. import _backend, config, ops, reference
from .._ops import routes
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
         grads=("x",), bytes=4.0 * b * f * (1 + g + 3),  # x read, the bases written: the expansion's traffic
         quick=(b <= 1024), devices=("cpu", "cuda", "mps") if b <= 1024 else ("cuda", "mps"))
    for b, f, g in [(1024, 256, 5), (4096, 1024, 16)]
]


def _kan_setup(batch, fin, fout, grid_size, order, first=False):
    """first: a network's first layer, whose input x needs no gradient."""
    def setup(device, dtype, gen):
        h = 2.0 / grid_size
        grid = (torch.arange(-order, grid_size + order + 1, dtype=torch.float64) * h - 1).expand(fin, -1)
        x = torch.rand(batch, fin, generator=gen, dtype=torch.float64) * 2.4 - 1.2
        r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64) / fin ** 0.5  # noqa: E731
        a = {"x": x, "base_weight": r(fout, fin), "spline_weight": r(fout, fin, grid_size + order),
             "spline_scaler": r(fout, fin) * fin ** 0.5}
        a = {k: v.to(device, dtype).requires_grad_(not (first and k == "x")) for k, v in a.items()}
        return {**a, "grid": grid.contiguous().to(device, dtype), "k": order}
    return setup


def _kan_args(a):
    return a["x"], a["grid"], a["base_weight"], a["spline_weight"], a["spline_scaler"], a["k"]


_KAN_GRADS = ("x", "base_weight", "spline_weight", "spline_scaler")


def _kan_run(route):
    def run(a):
        with config.using(kan_route=route):
            return ops.kan_linear(*_kan_args(a))
    return run


def _auto_route(a, device):
    x, sw = a["x"], a["spline_weight"]
    backend = _backend.backend_for(x)
    return {"route_auto": routes.kan_route(backend, x.shape[0], sw.shape[1], sw.shape[0], sw.shape[2], a["k"],
                                            dtype=x.dtype)}


def _kan_cases(batch, fin, fout, g, devices, goal, targets, quick=True, k=3, first=False, tf32=False,
               routes=("gemm", "fused")):
    """One row per route (the fused kernels take orders <= 7), each against efficient-kan's formulation;
    flops: dense-equivalent 2·batch·out·in·(n_basis+1), useful 2·batch·out·in·(k+2). first: x needs no
    gradient (a network's first layer); tf32: fp32 only, both sides with tf32 matmuls allowed."""
    dtypes = {"cuda": (torch.float32,)} if tf32 else {}
    return [Case("kan_linear", f"b{batch} {fin}->{fout} G={g} k={k}" + (" first layer" if first else "")
                 + (" tf32" if tf32 else ""),
                 _kan_setup(batch, fin, fout, g, k, first), run=_kan_run(route),
                 reference=lambda a: reference.kan_linear(*_kan_args(a)), grads=_KAN_GRADS[1:] if first else _KAN_GRADS,
                 backward_products=1 if first else 2,
                 flops=2.0 * batch * fin * fout * (g + k + 1), useful_flops=2.0 * batch * fin * fout * (k + 2),
                 devices=devices, goal=goal, targets=targets, quick=quick, route=route, info=_auto_route, tf32=tf32,
                 **({"dtypes": dtypes} if dtypes else {}))
            for route in routes]


_CPU = ("cpu",)
_GPU = ("cuda", "mps")
# Memory goals compare working memory: the fwd+bwd peak less the gradients both sides return (the
# parameters' gradients alone are a quarter of efficient-kan's whole peak at b100 1000->1000).
_MEM = "fwdbwd_working_ratio <= 0.25"
CASES += (
    _kan_cases(100, 1000, 1000, 5, _CPU, "fwd+bwd >= 2x the reference (KAN-benchmarking's size), <= 1/4 of its "
               "working memory", ("fwdbwd_speedup >= 2", _MEM), quick=False)
    + _kan_cases(1, 1000, 1000, 5, _CPU, "", (), quick=False)  # one row: the route rule's case (routes.py)
    + _kan_cases(4096, 2, 16, 5, _CPU + _GPU, "", ())  # a PINN's first layer (x, t): fewer features than lanes
    + _kan_cases(64, 784, 64, 5, _CPU + _GPU, "<= 1/4 of the reference's working memory", (_MEM,),
                 first=True)  # an MNIST KAN's first layer (no grad_x), batch ~ out: weight-sized scratch counts
    + _kan_cases(1024, 256, 256, 5, _CPU, "fwd+bwd >= 2.5x the reference, <= 1/4 of its working memory",
                 ("fwdbwd_speedup >= 2.5", _MEM))
    + _kan_cases(1024, 256, 256, 16, _CPU, "fwd+bwd >= 5x the reference, <= 1/8 of its working memory",
                 ("fwdbwd_speedup >= 5", "fwdbwd_working_ratio <= 0.125"), quick=False)
    + _kan_cases(4096, 1024, 1024, 5, _GPU, "fwd+bwd >= 3x the reference (H100/H200), <= 1/4 of its working memory",
                 ("fwdbwd_speedup >= 3", _MEM))
    + _kan_cases(4096, 1024, 1024, 16, _GPU, "fwd+bwd >= 3x the reference (H100/H200), <= 1/4 of its working memory",
                 ("fwdbwd_speedup >= 3", _MEM), quick=False)
    + _kan_cases(4096, 1024, 1024, 5, ("cuda",), "fwd+bwd >= 3x the reference (H100/H200)", ("fwdbwd_speedup >= 3",),
                 tf32=True, routes=("gemm",))  # "fp32, tf32 allowed": cuBLAS's tf32 on both sides
)
