"""Which route kan_linear takes: the vendor GEMM over generated basis tiles, or swisk's fused kernels.
The rule is written next to the measurements that justify it (python -m swisk bench, --op kan_linear)."""
from __future__ import annotations

from .. import config

MAX_FUSED_ORDER = 7  # the fused kernels' register arrays (kernels/bspline.h SWISK_MAX_SPLINE_ORDER)


def kan_route(backend: str, rows: int, in_f: int, out_f: int, n_basis: int, order: int) -> str:
    """'gemm' or 'fused' for a kan_linear call (forward and backward take the same route)."""
    chosen = config.get("kan_route")
    if chosen == "fused" and order <= MAX_FUSED_ORDER:
        return "fused"
    if chosen == "gemm" or order > MAX_FUSED_ORDER:
        return "gemm"
    if backend != "cpu":  # CUDA, MPS and their emulators: the vendor GEMM until a device measurement decides
        return "gemm"
    return _cpu_rule(rows, in_f, out_f, n_basis, order)


def _cpu_rule(rows: int, in_f: int, out_f: int, n_basis: int, order: int) -> str:
    # The sparse fused kernel does (order + 2) multiply-adds per (row, feature, output), the GEMM
    # n_basis + 1 at the matmul's rate, plus the tile generation.
    return "gemm" if (n_basis + 1) <= 3 * (order + 2) else "fused"
