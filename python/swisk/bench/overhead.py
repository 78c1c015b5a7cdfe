"""Per-call overhead rows: a tiny call of each op (batch 2, 4 -> 4), where the fixed cost of the
Python glue, the dispatcher and the launch is the whole cost, against F.linear of the same shape."""
from __future__ import annotations

import torch

from .. import ops
from .cases import Case

_CALLS = 200


def _setup(device, dtype, gen):
    r = lambda *s: torch.randn(*s, generator=gen).to(device, dtype)  # noqa: E731
    grid = torch.linspace(-2.2, 2.2, 12).expand(4, -1).contiguous().to(device, dtype)
    a = {"x": r(2, 4), "base_weight": r(4, 4), "spline_weight": r(4, 4, 8), "spline_scaler": r(4, 4),
         "scale": r(4, 4).abs() + 0.5, "translation": r(4, 4)}
    return {**{k: v.requires_grad_() for k, v in a.items()}, "grid": grid}


def _linear(a):
    return torch.nn.functional.linear(a["x"], a["base_weight"])


_GOAL = "<= 25 us per call (forward, no grad)"
_TARGETS = ("swisk_fwd_us_per_call <= 25",)
CASES = [
    Case("kan_linear", "b2 4->4 per call", _setup, calls=_CALLS, goal=_GOAL, targets=_TARGETS, reference=_linear,
         run=lambda a: ops.kan_linear(a["x"], a["grid"], a["base_weight"], a["spline_weight"], a["spline_scaler"], 3),
         grads=("x", "base_weight", "spline_weight", "spline_scaler")),
    Case("wavelet_kan", "b2 4->4 per call", _setup, calls=_CALLS, goal=_GOAL, targets=_TARGETS, reference=_linear,
         run=lambda a: ops.wavelet_kan(a["x"], a["scale"], a["translation"], a["base_weight"], "mexican_hat"),
         grads=("x", "scale", "translation", "base_weight")),
    Case("bspline_basis", "b2 in4 per call", _setup, calls=_CALLS, goal=_GOAL, targets=_TARGETS, reference=_linear,
         run=lambda a: ops.bspline_basis(a["x"], a["grid"], 3), grads=("x",)),
]
