"""Helpers for tests: the backend ids every op is checked on, and error bounds per dtype."""
from __future__ import annotations

import contextlib

import torch

from ._backend import cuda_usable, mps_usable, use_cpu_backend

__all__ = ["away_from_knots", "backend_ids", "backend", "device_of", "dtypes_of", "global_flags", "held",
           "torch_flag", "use_cpu_backend"]


def backend_ids() -> list:
    """'cpu', the two emulators, and the real GPU backends present here."""
    ids = ["cpu", "cuda-emu", "metal-emu"]
    if cuda_usable():
        ids.append("cuda")
    if mps_usable():
        ids.append("mps")
    return ids


def device_of(backend_id: str) -> torch.device:
    return torch.device(backend_id if backend_id in ("cuda", "mps") else "cpu")


def backend(backend_id: str):
    """Context in which ops on CPU tensors run on the given host backend (no-op for real devices)."""
    return use_cpu_backend(backend_id if backend_id in ("cpu", "cuda-emu", "metal-emu") else "cpu")


def dtypes_of(backend_id: str) -> list:
    """Floating dtypes a backend takes: fp64 only where there is a CPU (the native backend)."""
    base = [torch.float32, torch.float16, torch.bfloat16]
    return [torch.float64] + base if backend_id == "cpu" else base


# Global torch switches a test may flip: each is restored by torch_flag, and checked after every test.
GLOBAL_FLAGS = (
    ("torch.backends.cuda.matmul", "allow_tf32"),
    ("torch.backends.cuda.matmul", "allow_fp16_reduced_precision_reduction"),
    ("torch.backends.cuda.matmul", "allow_bf16_reduced_precision_reduction"),
    ("torch.backends.cudnn", "allow_tf32"),
    ("torch.backends.cudnn", "deterministic"),
    ("torch.backends.cudnn", "benchmark"),
)


def _owner(path: str):
    obj = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def global_flags() -> dict:
    """The current value of every global switch in GLOBAL_FLAGS, plus the default dtype and grad mode."""
    flags = {f"{path}.{name}": getattr(_owner(path), name) for path, name in GLOBAL_FLAGS}
    flags["default_dtype"] = torch.get_default_dtype()
    flags["grad_enabled"] = torch.is_grad_enabled()
    flags["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    return flags


@contextlib.contextmanager
def torch_flag(owner, name: str, value):
    """Sets a global torch switch (e.g. torch.backends.cuda.matmul.allow_tf32) and restores it on exit,
    with plain getattr/setattr (the switches are properties that pytest's monkeypatch cannot restore)."""
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


def away_from_knots(x: torch.Tensor, grid: torch.Tensor, margin: float = 1e-4, dim: int = -1) -> torch.Tensor:
    """x with each value closer than margin to one of its feature's knots (grid (features, n_knots),
    features along x's dim) moved to margin past that knot: B-splines are only piecewise smooth, and a
    finite difference (gradcheck's) must not straddle a knot. Knots must be more than 2·margin apart."""
    xf = x.movedim(dim, -1)
    d = xf.unsqueeze(-1) - grid.to(x.dtype)                        # (..., features, n_knots)
    nearest = d.abs().argmin(-1, keepdim=True)
    off = d.gather(-1, nearest).squeeze(-1)                        # x minus its nearest knot
    knot = (xf - off)
    moved = torch.where(off.abs() < margin, knot + torch.where(off < 0, -margin, margin), xf)
    return moved.movedim(-1, dim).contiguous()


def held(y: torch.Tensor, name: str):
    """What the forward that gave y still holds for its backward under name ("packed", "route",
    "sketch"; _ops/run.py hold), None if nothing."""
    token = getattr(y.grad_fn, "token", None)
    return next((v for (n, _), (_, v) in token.held.items() if n == name), None) if token is not None else None
