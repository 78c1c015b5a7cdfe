"""Shared pieces of the op registrations."""
from __future__ import annotations

import torch

DEVICES = ("cpu", "cuda", "mps")


def concrete(*tensors) -> bool:
    """True when every size is a plain int (not a symbolic size under torch.compile)."""
    return all(isinstance(s, int) for t in tensors if t is not None for s in t.shape)


def prep(*tensors):
    """Detached, contiguous inputs for the core (None passes through)."""
    return [None if t is None else t.detach().contiguous() for t in tensors]


def tensor_arg(op: str, arg: str, t, optional: bool = False):
    if t is None and optional:
        return None
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"[{op}] {arg}: expected a torch.Tensor, got {type(t).__name__}")
    return t


def int_arg(op: str, arg: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"[{op}] {arg}: expected an int, got {type(v).__name__}")
    return v
