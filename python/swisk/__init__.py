"""swisk: spline, wavelet and sketch kernels for PyTorch on CUDA, Metal and CPU."""
from __future__ import annotations

import os
import warnings

import torch  # noqa: F401  (the ops register with torch.library on import)

from . import _C
from ._backend import cuda_usable, mps_usable
from . import _ops  # noqa: F401  (registers torch.ops.swisk.*)
from . import config, ops, reference, nn, testing, compat  # noqa: F401

__version__ = _C.build_info()["version"]


def _check_vector_bytes() -> None:
    """SWISK_CPU_VEC_BYTES asks for one of the CPU KAN kernels' builds: say when it is not obeyed."""
    asked = os.environ.get("SWISK_CPU_VEC_BYTES")
    if asked is None:
        return
    got = _C.build_info()["cpu_vector_bytes"]
    if asked not in ("32", "64"):
        warnings.warn(f"[swisk] SWISK_CPU_VEC_BYTES: expected 32 or 64, got {asked!r}; "
                      f"the CPU KAN kernels run {got}-byte vectors", stacklevel=2)
    elif int(asked) != got:
        warnings.warn(f"[swisk] SWISK_CPU_VEC_BYTES={asked}: this build has no {asked}-byte CPU KAN kernels "
                      f"(they are built twice with GCC on x86-64 Linux); they run {got}-byte vectors", stacklevel=2)


_check_vector_bytes()


def build_info() -> dict:
    """How this copy of swisk was built: version, CUDA (and archs), Metal, and the OpenMP runtime in use.

    Args:
        None.

    Returns:
        dict with version, cuda_compiled, cuda_archs, metal_compiled, metal_source, openmp (the
        file name of the OpenMP runtime the CPU kernels share with torch, "" when they run serially),
        cpu_isa (the instruction set the CPU kernels run with here: "avx512", "avx2", "baseline"),
        cpu_vendor ("intel", "amd", or "" elsewhere; kan_linear's route rule reads it) and
        cpu_vector_bytes (the CPU KAN kernels' vectors: 64 on AVX-512 CPUs, else 32;
        SWISK_CPU_VEC_BYTES=32 or 64 chooses).

    Raises:
        Nothing.
    """
    return dict(_C.build_info())


def backends() -> dict:
    """Backends compiled into this build AND usable on this machine now.

    Args:
        None.

    Returns:
        {"cpu": True, "cuda": bool, "mps": bool}.

    Raises:
        Nothing.
    """
    return {"cpu": True, "cuda": cuda_usable(), "mps": mps_usable()}


def default_device() -> torch.device:
    """The best device swisk can run on here: cuda > mps > cpu.

    Args:
        None.

    Returns:
        torch.device.

    Raises:
        Nothing.
    """
    b = backends()
    return torch.device("cuda" if b["cuda"] else "mps" if b["mps"] else "cpu")


__all__ = ["build_info", "backends", "default_device", "ops", "nn", "compat", "reference", "testing"]
