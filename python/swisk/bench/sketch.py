"""Benchmark rows of the sketch family: x·Sᵀ with S generated in tiles per call, against x @ Sᵀ with the
same S materialised whole by swisk.ops.sketch_matrix (the memory the tiles save); the FWHT and the
SRHT against their plain-torch butterflies (the FWHT's bytes/s also against a copy: goal ≤ 3× a copy's
time on the CPU)."""
from __future__ import annotations

import torch

from .. import ops, reference
from .cases import Case


def _setup(batch, n):
    def setup(device, dtype, gen):
        return {"x": torch.randn(batch, n, generator=gen, dtype=torch.float64).to(device, dtype).requires_grad_()}
    return setup


def _case(batch, n, k, kind, devices, quick, nnz=8):
    return Case("sketch", f"b{batch} {n}->{k} {kind}", _setup(batch, n),
                run=lambda a: ops.sketch(a["x"], kind, k, 1234, nnz),
                reference=lambda a: a["x"] @ ops.sketch_matrix(kind, k, n, 1234, a["x"].dtype, a["x"].device, nnz).T,
                grads=("x",), flops=2.0 * batch * n * k, bytes=float(4 * (batch * n + batch * k)),
                devices=devices, quick=quick)


def _fwht_case(batch, n, devices):
    return Case("fwht", f"b{batch} n{n}", _setup(batch, n), run=lambda a: ops.fwht(a["x"], n ** -0.5),
                reference=lambda a: reference.sketch.fwht(a["x"], n ** -0.5), grads=("x",),
                bytes=float(8 * batch * n), devices=devices)


def _fwht_copy_case(n, mib, devices):
    """The FWHT of `mib` MiB of fp32 rows of length n against a copy of the same bytes (x.clone(): both
    allocate their output)."""
    batch = mib * 2**20 // (4 * n)
    return Case("fwht", f"b{batch} n{n} vs copy", _setup(batch, n), run=lambda a: ops.fwht(a["x"], n ** -0.5),
                reference=lambda a: a["x"].clone(), bytes=float(8 * batch * n), devices=devices,
                dtypes={d: (torch.float32,) for d in ("cpu", "cuda", "mps")}, quick=False,
                goal="copy/fwht >= 1/3 (CPU), >= 0.8 (GPU)",
                targets=("cpu: fwd_speedup >= 0.3333", "cuda: fwd_speedup >= 0.8", "mps: fwd_speedup >= 0.8"))


def _srht_case(batch, n, k, devices):
    return Case("srht", f"b{batch} {n}->{k}", _setup(batch, n), run=lambda a: ops.srht(a["x"], k, 1234),
                reference=lambda a: reference.sketch.srht(a["x"], k, 1234), grads=("x",),
                bytes=float(4 * batch * (n + k)), devices=devices)


CASES = [
    *(_fwht_copy_case(2**e, 256, ("cpu", "cuda", "mps")) for e in range(8, 16)),
    _fwht_case(4096, 256, ("cpu",)),
    _fwht_case(256, 4096, ("cpu",)),
    _fwht_case(32, 32768, ("cpu",)),
    _srht_case(256, 4096, 256, ("cpu",)),
    _fwht_case(4096, 16384, ("cuda", "mps")),
    _srht_case(4096, 16384, 1024, ("cuda", "mps")),
    *(_case(256, 4096, 256, kind, ("cpu",), True) for kind in ("gaussian", "rademacher", "sparse_sign")),
    _case(64, 65536, 1024, "gaussian", ("cpu",), False),  # S of 256 MiB: four 64 MiB tiles against it whole
    _case(64, 65536, 1024, "sparse_sign", ("cpu", "cuda", "mps"), False),  # swisk's kernels: S never formed
    *(_case(4096, 16384, 1024, kind, ("cuda", "mps"), kind != "sparse_sign")
      for kind in ("gaussian", "rademacher", "sparse_sign")),
]
