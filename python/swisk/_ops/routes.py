"""Which route kan_linear takes: the vendor GEMM over generated basis tiles, or swisk's fused kernels.
The rule is written next to the measurements that justify it (python -m swisk bench, --op kan_linear)."""
from __future__ import annotations

import functools

import torch

from .. import _C, config
from .._backend import dtype_code

MAX_FUSED_ORDER = 7  # the fused kernels' register arrays (kernels/bspline.h SWISK_MAX_SPLINE_ORDER)


def kan_route(backend: str, rows: int, in_f: int, out_f: int, n_basis: int, order: int,
              differentiated: bool = True, dtype: torch.dtype = torch.float32) -> str:
    """'gemm' or 'fused' for a kan_linear call of x's dtype; differentiated: its backward follows
    (forward and backward then take the same route), else a forward alone (inference)."""
    chosen = config._settings["kan_route"]  # per call: the plain lookup
    if chosen == "fused" and order <= MAX_FUSED_ORDER:
        return "fused"
    if chosen == "gemm" or order > MAX_FUSED_ORDER:
        return "gemm"
    if backend in ("cuda", "cuda-emu"):  # the emulator takes the rule of the device it stands for
        return _cuda_rule(rows, in_f, out_f)
    if backend != "cpu":  # MPS and its emulator: the vendor GEMM until a device measurement decides
        return "gemm"
    return _cpu_rule(rows, in_f, out_f, n_basis, order, differentiated, dtype)


# Measured on an H100 80GB HBM3 (torch 2.11 + cu130, swisk 3f1d370 built for sm_90a, 2026-11-26;
# scripts/kan_route_sweep.py, G=5 k=3, medians of 11 interleaved pairs, synchronised wall time, JSON in
# benchmarks/results/cuda-h100-2026-11-26-kan-route-sweep.json), time of the fused route / time of the
# gemm route, forward (forward+backward), fp32 | bf16:
#   b1 4->4: 0.49 (0.58) | 0.35 (0.55)          b64 4->4: 0.39 (0.61) | 0.46 (0.54)
#   b4096 2->16: 0.44 (1.05) | 0.46 (0.77)      b1 64->64: 0.66 (0.59) | 0.85 (0.56)
#   b64 64->64: 0.64 (0.52) | 1.01 (0.46)       b1024 64->64: 0.51 (0.51) | 1.08 (0.63)
#   b1 256->256: 2.99 (0.72) | 3.34 (0.91)      b1024 256->256: 3.35 (1.78) | 3.07 (1.57)
#   b64 784->64: 3.14 (0.76) | 6.24 (1.31)      b16 1024->1024: 5.83 (2.27) | 4.93 (2.74)
#   b256 1024->1024: 9.70 (6.34) | 20.2 (4.41)  (bench, b4096 1024->1024: 7-20x in forward+backward)
# Small layers are launch-bound: the fused route is one kernel where the GEMM route packs the weights,
# generates a tile and multiplies (and more in backward). From 256->256 up the GEMM wins the forward by
# 2-20x; the fused backward's wins there (0.7-0.97 at few rows) do not pay for its forward.
_CUDA_FUSED_WEIGHTS = 64 * 64       # in * out
_CUDA_FUSED_WORK = 1024 * 64 * 64   # rows * in * out: the largest measured win (b1024 64->64)


def _cuda_rule(rows: int, in_f: int, out_f: int) -> str:
    small = in_f * out_f <= _CUDA_FUSED_WEIGHTS and rows * in_f * out_f <= _CUDA_FUSED_WORK
    return "fused" if small else "gemm"


# Measured on a 2-core EPYC (torch 2.13, MKL; fwd+bwd fp32, k=3, G=5, uniform knots, interleaved medians
# of 15 pairs, 2026-11-25, after the repacked weights lost their zero rows and the backward its second
# read of spline_weight), time of the fused route / time of the gemm route, 1 thread (2 threads):
#   b1 64->64: 0.64 (0.63)         b1 512->512: 1.13              b1 1000->1000: 1.13 (0.95)
#   b1 2048->2048: 1.29 (0.94)     b4 512->512: 0.82 (0.73)       b4 2048->2048: 0.92 (0.80)
#   b8 256->256: 0.79 (0.68)       b8 2048->2048: 0.97            b16 256->256: 0.79 (0.67)
#   b16 1000->1000: 0.84 (0.80)    b16 2048->2048: 0.98 (0.83)    b32 512->512: 0.77-1.00 (0.72)
#   b32 1000->1000: 0.74 (0.72)    b48 1000->1000: 0.69 (0.64)    b64 128->128: 0.63 (0.61)
#   b64 1000->1000: 0.64           b96 256->256: 0.56 (0.57)      b100 1000->1000: 0.59
#   b128 64->64: 0.61              b128 128->128: 0.54            b128 512->512: 0.53
#   b1024 256->256 (bench): 0.72 (0.72)   b64 2048->4096: (0.79)         b256 4096->4096: (0.60)
# Rows 1-3 again (2026-11-25, later; fused / gemm, medians of 11 interleaved pairs, 1 thread (2 threads)):
#   b1 128->128: 0.83 (0.75)      b1 256->256: 1.52 (1.00)      b1 512->512: 1.05 (0.85)
#   b1 1000->1000: 1.14 (0.83)    b1 2048->2048: 1.37 (0.92)
#   b2 128->128: 0.83 (0.62)      b2 256->256: 1.16 (0.75)      b2 320->320: 1.10     b2 384->384: 0.84
#   b2 512->512: 0.67 (0.68)      b2 1000->1000: 0.82 (0.61)    b2 256->1024: 0.82    b2 1024->256: 0.57
#   b3 192->192: 1.13             b3 256->256: 0.97 (0.84)      b3 512->512: 0.64 (0.61)
#   b3 1000->1000: 0.76 (0.53)    b3 2048->2048: 0.84 (0.79)
# A forward alone (no backward to follow, e.g. inference), fused / gemm (2026-11-25, 11 pairs, 1 thread
# (2 threads)): b1 64->64 0.48 (0.48), 256->256 0.58 (0.62), 512->512 0.49, 1000->1000 0.47 (0.46),
# 2048->2048 0.76 (0.69); b2, b4, b16 1000->1000 0.41, 0.49, 0.51: the GEMM route's forward packs
# spline_weight·spline_scaler (a pass over the weights that its backward would reuse).
# The GEMM route's products with 2 or 3 rows (the weight gradient's GEMM of inner dimension 2-3, and
# GEMMs of 2-3 output rows) take 2-3x a single row's outer product and GEMV; the fused kernels' cost is
# nearly flat in the rows here (their weights' repacking dominates).
# The fused kernels do k+2 multiply-adds per (row, feature, output) where the GEMM does n_basis+1, but
# repack the weights and unpack their gradient on every call: with a single row on one thread that
# costs more than the GEMM route's GEMV on all but tiny layers (scratch within 512 KiB), where the GEMM
# route's fixed costs dominate; with two threads the fused kernels split the repacking and win. They
# run in chunks of outputs (forward) and features (backward) whose repacked weights and gradient take a
# quarter of the layer's weights, 4 (backward 0.5) to 16 MiB (kan_cpu_chunk_bytes); that must fit the workspace bound
# (swisk.config workspace_bytes).
# (Before the non-finite weights' scan took its 2 words per weight only when it runs, that scratch
# alone kept layers from 2048->4096 up on the GEMM route.)
# Rows 1-4 in fp32/fp64 since (2026-11-27) read the parameters as stored in forward and backward alike
# (cpu/kan_direct.h: one pass each, the gradients written as stored, scratch of the knot table alone);
# fwd+bwd, fused / gemm, medians of 9 interleaved steps in one process (the GEMM route as before):
#   1 thread:  b1 64->64 0.58, 256->256 0.47, 1000->1000 0.72, 2048->2048 0.94;
#              b4 64->64 0.56, 256->256 0.54, 1000->1000 0.62
#   2 threads: b1 64->64 0.54, 256->256 0.54, 1000->1000 0.58, 2048->2048 0.60; b4 256->256 0.49, 1000->1000 0.49
# Without AVX-512 (an AVX2 EPYC, 2 cores, copy 9 GB/s against the AVX-512 VM's 22-41, fp32 matmul 0.084
# TFLOP/s on 1 thread; 32-byte vectors, 2026-11-27; fused / gemm fwd+bwd, medians of 3-15 interleaved
# pairs, 1 thread (2 threads)): b1 64->64 0.59, b1 1000->1000 0.53 (0.52), b4 1000->1000 0.66 (0.51),
# b8 256->256 0.78, b64 784->64 0.87 (0.99), b128 128->128 0.84, b32 512->512 (0.82), b1024 256->256
# 0.90 (1.08); but b16 1000->1000 1.48 (0.99), b100 1000->1000 1.26 (1.21), b256 1024->1024 1.33 (1.11),
# b16 2048->2048 (1.21): the fused kernels' repacking (three passes over the weights each way) costs
# more than their fewer multiply-adds save once the weights are far out of cache and the bandwidth low.
# With AVX-512 on an Intel CPU (a 2-core Xeon VM with avx512_fp16, 2 MiB L2 per core; fp32 matmul 0.16
# TFLOP/s and copy 12 GB/s on 1 thread, against the AMD VMs' 0.08-0.11 and 9-41; 2026-11-28, 64-byte
# vectors, scripts/kan_route_sweep.py --device cpu --dtypes float32 --phases fwdbwd --reps 9, fused / gemm,
# 1 thread (2 threads)): MKL's GEMM takes its AVX-512 kernels there, and the fused kernels lose from
# ~4 MB of weights at 16 rows and more: b16 1000->1000 1.59 (1.68), b100 1.25 (1.56), b256 1.13 (1.48),
# b16 2048->2048 1.37 (1.40), b256 1024->1024 1.25 (1.16), b16 / b64 / b256 512->512 1.39 / 1.29 / 1.27
# (1.27 / 1.19 / 1.20), b64 / b256 384->384 1.23 / 1.05 (1.20 / 1.18), b256 256->1024 1.26 (1.21), b256
# 1024->256 1.28 (1.32); even at 1024-4096 rows: b1024 384->384 0.95 (1.06), b1024 512->512 0.97 (1.17),
# b4096 512->512 0.94 (1.02), b4096 1024->1024 0.94 (1.02); the fused kernels keep 256->256 (2.6 MB):
# b256 0.88 (0.98), b1024 0.79 (0.95), and fewer rows: b8 1000->1000 0.91 (0.93), b8 512->512 0.95 (0.91).
# More bases per feature shift it back (the GEMM's n_basis + 1 columns against the fused k + 2; 1 thread,
# reps 7): G=10 b64 / b256 512->512 1.11 / 0.81, b16 / b100 1000->1000 1.11 / 0.97, b256 384->384 0.88;
# G=16 1.03 / 0.70, 1.03 / 0.90, 0.68 (the bench's b1024 256->256 G=16: fused 8.4x the formulation, gemm 4.5x).
# AMD's AVX-512 (the 2-core EPYC of the 11-25 rows above) ran MKL's AVX2 kernels, and the fused kernels
# won there at every size measured. So on Zen 5 (a 2-core EPYC of CPU family 26, 512-bit datapaths; MKL
# 0.11 TFLOP/s on 1 thread; 2026-11-28, --reps 7, JSON cpu-epyc-zen5-2026-11-28-route-sweep.json), fused
# / gemm forward alone (forward+backward), 1 thread | 2 threads: b16 1000->1000 0.49 (0.65) | 0.50 (0.69),
# b100 0.55 (0.57) | 0.32 (0.52), b256 1024->1024 0.57 (0.54) | 0.56 (0.51), b4096 0.55 (0.43) | 0.55
# (0.43), b256 / b1024 512->512 0.61 / 0.62 (0.48 / 0.46) | 0.63 / 0.63 (0.48 / 0.46), b1024 384->384 0.58
# (0.46) | 0.59 (0.46), 256->256 at b1024 / b4096 0.49 / 0.48 (0.45 / 0.45) | 0.50 / 0.48 (0.46 / 0.38),
# b256 2048->2048 0.53 (0.60) | 0.47 (0.58): forwards alone from 256 rows included.
# A forward alone (no_grad) on that Intel CPU packs W afresh on each call (no backward shares it), so the
# GEMM route wins later, from 256 rows (2026-11-28, --phases fwd --reps 9, fused / gemm, 1 thread (2)):
# b256 1024->1024 1.16 (1.20), b512 1.00 (1.13), b4096 1.47 (1.38); b256 512->512 1.29 (1.32), b1024
# 1.46 (1.32); b512 / b1024 384->384 1.20 / 1.26 (1.22 / 1.17); b256 2048->2048 1.04 (1.08); but b128
# 1000->1000 0.75 (1.10), b100 0.92 (1.00), b16 0.70 (0.77), b128 512->512 1.12 (1.26), b64 0.97 (1.13),
# 256->256 at b1024 / b4096 0.91 / 0.80 (1.01 / 0.70); G=16: b256 1024->1024 0.64 (0.71), b4096 0.94
# (0.80), b1024 512->512 0.81 (0.72).
_NARROW_GEMM_ROWS = 16
_NARROW_GEMM_ROWS_FORWARD = 256  # a forward alone, Intel AVX-512
_NARROW_GEMM_BYTES = 16 << 20  # in * out * (n_basis + 2) * 4: 1000->1000 G=5 is 40 MB, 512->512 10.5 MB
_NARROW_GEMM_BYTES_INTEL_AVX512 = 4 << 20  # 384->384 G=5 is 5.9 MB, 256->256 2.6 MB


@functools.lru_cache(maxsize=1)
def _cpu_isa() -> str:
    return _C.build_info()["cpu_isa"]


@functools.lru_cache(maxsize=1)
def _cpu_vendor() -> str:
    return _C.build_info()["cpu_vendor"]


def _narrow_gemm(rows: int, in_f: int, out_f: int, n_basis: int, order: int, differentiated: bool) -> bool:
    """Whether a call takes the GEMM route on this CPU for its weights' size (measured above); never on
    AMD's AVX-512; a forward alone only on Intel's (unmeasured on AVX2 from 256 rows up)."""
    if rows < (_NARROW_GEMM_ROWS if differentiated else _NARROW_GEMM_ROWS_FORWARD):
        return False
    size = in_f * out_f * (n_basis + 2) * 4
    if _cpu_isa() != "avx512":
        return differentiated and size > _NARROW_GEMM_BYTES
    if _cpu_vendor() != "intel":
        return False
    return size > _NARROW_GEMM_BYTES_INTEL_AVX512 and 2 * (n_basis + 1) <= 5 * (order + 2)


_DIRECT_ROWS = 4  # C++ kKanCpuDirectRows
_FUSED_MIN_ROWS = 2
_FUSED_TINY_BYTES = 512 << 10  # the fused kernels' scratch of a tiny layer (b1 64->64: 0.33 MiB)


@functools.lru_cache(maxsize=256)
def _fused_bytes(in_f: int, out_f: int, n_basis: int, order: int) -> int:
    """The fused kernels' scratch in bytes (fp32; forward or backward, whichever is larger)."""
    f32 = dtype_code(torch.float32)
    return 4 * max(_C.kan_linear_workspace(in_f, out_f, n_basis, order, f32, "cpu", back, False)
                   for back in (False, True))


def _cpu_rule(rows: int, in_f: int, out_f: int, n_basis: int, order: int, differentiated: bool,
              dtype: torch.dtype) -> str:
    if 1 <= rows <= _DIRECT_ROWS and dtype in (torch.float32, torch.float64):
        return "fused"
    if _fused_bytes(in_f, out_f, n_basis, order) > config._settings["workspace_bytes"]:
        return "gemm"
    if _narrow_gemm(rows, in_f, out_f, n_basis, order, differentiated):
        return "gemm"
    if not differentiated or rows >= _FUSED_MIN_ROWS or torch.get_num_threads() > 1:
        return "fused"
    return "fused" if _fused_bytes(in_f, out_f, n_basis, order) <= _FUSED_TINY_BYTES else "gemm"
