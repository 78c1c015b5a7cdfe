"""Rows against the newest peers on PyPI, when installed (they are not dependencies): flashkan's and
inkan's KANLayer (uniform cubic grids, closed-form bases, one dense GEMM) against swisk.ops.kan_linear
(its automatic route, recorded as route_auto) at the same sizes, fwd+bwd fp32 on the CPU. The pair
ratio is swisk's speed-up over the peer."""
from __future__ import annotations

import importlib.util

import torch

from .. import ops
from .cases import Case
from .spline import _KAN_GRADS, _auto_route, _kan_args, _kan_setup

_GOAL = "fwd+bwd >= 1.5x the peer"


def _peer_setup(module, batch, fin, fout, g):
    base = _kan_setup(batch, fin, fout, g, 3)

    def setup(device, dtype, gen):
        a = base(device, dtype, gen)
        torch.manual_seed(0)
        mod = importlib.import_module(module)
        a["peer"] = mod.KANLayer(fin, fout, grid_size=g, spline_order=3).to(device, dtype)
        return a
    return setup


def _peer_run(a):
    a["peer"].zero_grad(set_to_none=True)  # as swisk's side: fresh gradients every step
    return a["peer"](a["x"])


def _cases(module):
    if importlib.util.find_spec(module) is None:
        return []
    return [Case("kan_linear", f"b{b} {fin}->{fout} G=5 k=3 vs {module}", _peer_setup(module, b, fin, fout, 5),
                 run=lambda a: ops.kan_linear(*_kan_args(a)), reference=_peer_run,
                 grads=_KAN_GRADS, devices=("cpu",), goal=_GOAL, targets=("fwdbwd_speedup >= 1.5",), quick=False,
                 info=_auto_route)
            for b, fin, fout in [(1024, 256, 256), (4096, 1024, 1024)]]


CASES = _cases("flashkan") + _cases("inkan")
