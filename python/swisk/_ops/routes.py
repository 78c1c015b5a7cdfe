"""Which route kan_linear takes: the vendor GEMM over generated basis tiles, or swisk's fused kernels.
The rule is written next to the measurements that justify it (python -m swisk bench, --op kan_linear)."""
from __future__ import annotations

from .. import config

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


# Measured on a 2-core EPYC (torch 2.13, MKL; fwd+bwd fp32, k=3, uniform knots, interleaved medians;
# python -m swisk bench --op kan_linear --threads 1,2), time of the fused route / time of the gemm route:
#   b1 64->64 G=5: 0.81           b64 128->128 G=5: 0.98-1.08     b16 256->256 G=5: 1.74
#   b32 512->512 G=5: 1.56        b128 512->512 G=5: 1.01         b256 512->512 G=10: 0.80-0.88
#   b512 512->512 G=5: 0.66       b1024 256->256 G=5: 0.78-0.83   b1024 256->256 G=16: 0.59-0.63
#   b4096 256->256 G=5: 0.39      b100 1000->1000 G=5: 1.23-2.3   b256 1000->1000 G=5: 1.18
# The fused kernels do k+2 multiply-adds per (row, feature, output) where the GEMM does n_basis+1, but
# repack, zero and unpack the weights and their gradient on every call: they win from about 128 rows,
# and on tiny layers, where the GEMM route's fixed costs dominate. Their repacked weights and gradient
# (in, n_basis+2k+1, out) must fit the workspace bound (swisk.config workspace_bytes).
_FUSED_MIN_ROWS = 128
_FUSED_TINY_BYTES = 256 << 10


def _cpu_rule(rows: int, in_f: int, out_f: int, n_basis: int, order: int) -> str:
    weights = in_f * (n_basis + 2 * order + 1) * -(-out_f // 16) * 16 * 4  # fp32, per copy
    if 2 * weights > config._settings["workspace_bytes"]:
        return "gemm"
    return "fused" if rows >= _FUSED_MIN_ROWS or weights <= _FUSED_TINY_BYTES else "gemm"
