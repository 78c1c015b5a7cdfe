"""Which route kan_linear takes: the vendor GEMM over generated basis tiles, or swisk's fused kernels.
The rule is written next to the measurements that justify it (python -m swisk bench, --op kan_linear)."""
from __future__ import annotations

import functools

import torch

from .. import _C, config
from .._backend import dtype_code

MAX_FUSED_ORDER = 7  # the fused kernels' register arrays (kernels/bspline.h SWISK_MAX_SPLINE_ORDER)


def kan_route(backend: str, rows: int, in_f: int, out_f: int, n_basis: int, order: int) -> str:
    """'gemm' or 'fused' for a kan_linear call (forward and backward take the same route)."""
    chosen = config._settings["kan_route"]  # per call: the plain lookup
    if chosen == "fused" and order <= MAX_FUSED_ORDER:
        return "fused"
    if chosen == "gemm" or order > MAX_FUSED_ORDER:
        return "gemm"
    if backend != "cpu":  # CUDA, MPS and their emulators: the vendor GEMM until a device measurement decides
        return "gemm"
    return _cpu_rule(rows, in_f, out_f, n_basis, order)


# Measured on a 2-core EPYC (torch 2.13, MKL; fwd+bwd fp32, k=3, G=5 unless named, uniform knots,
# interleaved medians; python -m swisk bench --op kan_linear and the same pairs per size), time of the
# fused route / time of the gemm route, 1 thread (2 threads):
#   b1 64->64: 0.80                b8 256->256: 1.86              b16 256->256: 3.07
#   b32 512->512: 1.39             b48 1000->1000: 1.11 (0.93)    b64 128->128: 1.08 (0.98)
#   b64 1000->1000: 0.93 (0.83)    b96 256->256: 1.14 (0.87)      b100 1000->1000: 0.81 (0.73)
#   b128 64->64: 0.79              b128 128->128: 0.88 (0.84)     b128 512->512: 0.82 (0.79)
#   b256 512->512 G=10: 0.45       b1024 256->256: 0.55           b4096 1024->1024: 0.44 (0.42)
#   b1 2048->2048: 2.78            b16 2048->2048: 1.94
# The fused kernels do k+2 multiply-adds per (row, feature, output) where the GEMM does n_basis+1, but
# repack, zero and unpack the weights and their gradient on every call: they win from about 100 rows
# (64 on layers of 2^19 weights and more), and on tiny layers, where the GEMM route's fixed costs
# dominate. They run in chunks of outputs (forward) and features (backward) whose repacked weights and
# gradient take at most 16 MiB (kKanCpuChunkBytes); that must fit the workspace bound (swisk.config
# workspace_bytes).
_FUSED_MIN_ROWS = 100
_FUSED_MIN_ROWS_LARGE = 64
_LARGE = 1 << 19
_FUSED_TINY_BYTES = 256 << 10


@functools.lru_cache(maxsize=256)
def _fused_bytes(in_f: int, out_f: int, n_basis: int, order: int) -> int:
    """The fused kernels' scratch in bytes (fp32; forward or backward, whichever is larger)."""
    f32 = dtype_code(torch.float32)
    return 4 * max(_C.kan_linear_workspace(in_f, out_f, n_basis, order, f32, "cpu", back, False)
                   for back in (False, True))


def _cpu_rule(rows: int, in_f: int, out_f: int, n_basis: int, order: int) -> str:
    if _fused_bytes(in_f, out_f, n_basis, order) > config._settings["workspace_bytes"]:
        return "gemm"
    weights = in_f * (n_basis + 2 * order + 1) * -(-out_f // 16) * 16 * 4
    if rows >= _FUSED_MIN_ROWS or (rows >= _FUSED_MIN_ROWS_LARGE and in_f * out_f >= _LARGE):
        return "fused"
    return "fused" if weights <= _FUSED_TINY_BYTES else "gemm"
