"""Helpers for tests: the backend ids every op is checked on, and error bounds per dtype."""
from __future__ import annotations

import torch

from ._backend import cuda_usable, mps_usable, use_cpu_backend

__all__ = ["backend_ids", "backend", "device_of", "dtypes_of", "use_cpu_backend"]


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
