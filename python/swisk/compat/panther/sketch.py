"""Panther's sketching operators (``panther.sketch``) with its signatures, on swisk's seeded Philox
operators (swisk.ops.sketch_matrix): the same distribution and scaling as Panther's, and with
``seed=`` the same matrix on every device and thread count. Without a seed, one is drawn from torch's
default generator, so ``torch.manual_seed`` makes a call reproducible (the matrices are not Panther's
own draws)."""
from __future__ import annotations

import math

import torch

from ... import ops
from ...nn._checks import int_arg

__all__ = ["scaled_sign_sketch", "gaussian_skop", "count_skop", "sjlt_skop", "dense_sketch_operator", "srht",
           "DistributionFamily"]


class DistributionFamily:
    """Panther's distribution families for dense_sketch_operator."""
    Gaussian = "gaussian"
    Uniform = "uniform"


def _seed(fn, seed):
    if seed is None:
        return int(torch.randint(0, 2**62, (), dtype=torch.int64))
    return int_arg(fn, "seed", seed, 0, 2**63 - 1)


def _matrix(fn, kind, m, n, seed, device, dtype, nnz=8, names=("m", "n")):
    """The (m, n) operator, its sizes and seed checked in the name of fn (Panther's function)."""
    m, n = int_arg(fn, names[0], m, 1), int_arg(fn, names[1], n, 1)
    return ops.sketch_matrix(kind, m, n, _seed(fn, seed), dtype=dtype or torch.float32, device=device or "cpu",
                             nnz=nnz)


def scaled_sign_sketch(m: int, n: int, device=None, dtype=None, seed=None) -> torch.Tensor:
    """(m, n) with entries ±1/√m (Rademacher)."""
    return _matrix("scaled_sign_sketch", "rademacher", m, n, seed, device, dtype)


def gaussian_skop(m: int, d: int, device=None, dtype=None, seed=None) -> torch.Tensor:
    """(m, d) with entries N(0, 1/m)."""
    return _matrix("gaussian_skop", "gaussian", m, d, seed, device, dtype, names=("m", "d"))


def count_skop(m: int, d: int, device=None, dtype=None, seed=None) -> torch.Tensor:
    """(m, d) CountSketch: one ±1 per column, at a random row."""
    return _matrix("count_skop", "sparse_sign", m, d, seed, device, dtype, nnz=1, names=("m", "d"))


def sjlt_skop(m: int, d: int, sparsity: int = 2, device=None, dtype=None, seed=None) -> torch.Tensor:
    """(m, d) sparse JL transform: `sparsity` entries ±1/√sparsity per column, at distinct rows."""
    m, sparsity = int_arg("sjlt_skop", "m", m, 1), int_arg("sjlt_skop", "sparsity", sparsity, 1)
    if sparsity > m:
        raise ValueError(f"[sjlt_skop] sparsity: must not exceed m = {m}, got {sparsity}")
    return _matrix("sjlt_skop", "sparse_sign", m, d, seed, device, dtype, nnz=sparsity, names=("m", "d"))


def dense_sketch_operator(m: int, n: int, distribution, device=None, dtype=None, seed=None) -> torch.Tensor:
    """(m, n) with unscaled entries: N(0, 1) (Gaussian, the Philox operator) or uniform on [-√3, √3]
    (Uniform: torch's generator seeded with `seed`, reproducible per device)."""
    fn = "dense_sketch_operator"
    if distribution in (DistributionFamily.Gaussian, "gaussian"):
        return _matrix(fn, "gaussian", m, n, seed, device, dtype) * math.sqrt(m)
    if distribution in (DistributionFamily.Uniform, "uniform"):
        m, n = int_arg(fn, "m", m, 1), int_arg(fn, "n", n, 1)
        dev = torch.device(device or "cpu")
        g = torch.Generator(device=dev).manual_seed(_seed(fn, seed))
        u = torch.rand(m, n, generator=g, device=dev, dtype=dtype or torch.float32)
        return (u - 0.5) * math.sqrt(12.0)
    raise ValueError(f"[dense_sketch_operator] distribution: expected Gaussian or Uniform, got {distribution!r}")


def srht(x: torch.Tensor, m: int, seed=None) -> torch.Tensor:
    """Panther's SRHT of x (..., n), n a power of two: m entries of H·D·x/√n (random signs D, Walsh–
    Hadamard H, m distinct rows), i.e. swisk.ops.srht scaled by √(m/n)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"[srht] x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError("[srht] x: must be (..., n), got a 0-d tensor")
    n = x.shape[-1]
    if n <= 0 or n & (n - 1):
        raise ValueError(f"[srht] x: the last dimension must be a power of two, got {n}")
    return ops.srht(x, m, _seed("srht", seed)) * math.sqrt(m / n)
