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


# Measured on a 2-core EPYC (torch 2.13, MKL; fwd+bwd fp32, k=3, interleaved medians, 1 and 2 threads),
# time of the fused route / time of the gemm route:
#   b1 64->64 G=5: 0.63-0.69      b64 128->128 G=5: 0.70-0.80     b1024 256->256 G=5: 0.80-0.81
#   b4096 256->256 G=5: 0.74-0.83 b1024 256->256 G=16: 0.62-0.63  (the fused kernel wins: its weights
#   stay in cache and it does k+2 multiply-adds per (row, feature, output), the GEMM n_basis+1)
#   b256 512->512 G=10: 1.12-1.18 b100 1000->1000 G=5: 1.55-1.80  (the gemm route wins: the fused
#   kernel streams weights that no longer fit in cache)
# The boundary: the weights the fused kernel touches, out·in·(k+2) values, past 2 MiB.
_FUSED_WEIGHT_BYTES = 2 << 20


def _cpu_rule(rows: int, in_f: int, out_f: int, n_basis: int, order: int) -> str:
    return "gemm" if out_f * in_f * (order + 2) * 4 > _FUSED_WEIGHT_BYTES else "fused"
