"""Runs swisk's kernels at the bench's GPU sizes, a few calls each, for a profiler to read:
    ncu --kernel-name regex:'expand|contract|fwht|sparse' --launch-skip 2 --launch-count 4 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats python scripts/gpu_kernels.py
Prints each case's median time (CUDA events) and its bytes per second against a same-size copy.
usage: python scripts/gpu_kernels.py [--case NAME ...] [--calls 5] [--device cuda]"""
import argparse
import time

import torch

import swisk


def _basis(dtype, b=4096, f=1024, g=16, k=3):
    grid = (torch.arange(-k, g + k + 1, dtype=torch.float64) * (2.0 / g) - 1).expand(f, -1).contiguous()
    x = torch.rand(b, f, dtype=torch.float64) * 2.4 - 1.2
    x, grid = x.to(DEV, dtype), grid.to(DEV, dtype)
    return (lambda: swisk.ops.bspline_basis(x, grid, k)), b * f * (1 + g + k)


def _expand(dtype, b=4096, f=1024, g=5, k=3):
    grid = (torch.arange(-k, g + k + 1, dtype=torch.float64) * (2.0 / g) - 1).expand(f, -1).contiguous()
    x = torch.rand(b, f, dtype=torch.float64) * 2.4 - 1.2
    x, grid = x.to(DEV, dtype), grid.to(DEV, dtype)
    return (lambda: swisk.ops.kan_expand(x, grid, k)), b * f * (2 + g + k)


def _contract(dtype, b=4096, f=1024, g=5, k=3):
    """The backward's dx from dA (b, f·(1 + g + k)): the expansion's derivative columns contracted with dA;
    its bytes are dA's, x's and dx's."""
    grid = (torch.arange(-k, g + k + 1, dtype=torch.float64) * (2.0 / g) - 1).expand(f, -1).contiguous()
    x = torch.rand(b, f, dtype=torch.float64) * 2.4 - 1.2
    x, grid = x.to(DEV, dtype), grid.to(DEV, dtype)
    da = torch.randn(b, f * (1 + g + k), device=DEV, dtype=dtype)
    return (lambda: torch.ops.swisk.kan_contract(x, grid, da, k, 1, True)), b * f * (3 + g + k)


def _fwht(dtype, n=32768):
    x = torch.randn(2**28 // 4 // n, n, device=DEV, dtype=dtype)
    return (lambda: swisk.ops.fwht(x)), 2 * x.numel()


def _sparse(dtype, transpose=False, b=4096, n=16384, k=1024, nnz=8):
    """Sparse-sign x S^T (or g S) on the route CUDA's rule picks (bf16 at these sizes: cuBLAS over tiles of S,
    fp32 swisk's table passes and product); its bytes are the input's and output's."""
    x = torch.randn(b, k if transpose else n, device=DEV, dtype=dtype)
    if transpose:
        return (lambda: torch.ops.swisk.sketch_transpose(x, "sparse_sign", n, 1234, nnz)), b * (n + k)
    return (lambda: swisk.ops.sparse_sign_sketch(x, k, nnz, 1234)), b * (n + k)


DEV = torch.device("cuda")
CASES = {
    "basis_f32": lambda: _basis(torch.float32), "basis_bf16": lambda: _basis(torch.bfloat16),
    "expand_f32": lambda: _expand(torch.float32), "expand_bf16": lambda: _expand(torch.bfloat16),
    "contract_f32": lambda: _contract(torch.float32), "contract_bf16": lambda: _contract(torch.bfloat16),
    "fwht_4096": lambda: _fwht(torch.float32, 4096), "fwht_8192": lambda: _fwht(torch.float32, 8192),
    "fwht_16384": lambda: _fwht(torch.float32, 16384), "fwht_32768": lambda: _fwht(torch.float32, 32768),
    "sparse_f32": lambda: _sparse(torch.float32), "sparse_bf16": lambda: _sparse(torch.bfloat16),
    "sparse_t_f32": lambda: _sparse(torch.float32, True),
    "sparse_b64_f32": lambda: _sparse(torch.float32, b=64, n=65536),
    "sparse_b64_t_f32": lambda: _sparse(torch.float32, True, b=64, n=65536),
}


def _median_ms(fn, calls):
    """Median of CUDA-event times (synchronised wall time elsewhere)."""
    times = []
    for _ in range(calls):
        if DEV.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", action="append", choices=sorted(CASES))
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    global DEV
    DEV = torch.device(args.device)
    src = torch.randn(2**26, device=DEV)
    dst = torch.empty_like(src)
    copy_ms = _median_ms(lambda: dst.copy_(src), 10)
    copy_gbps = 2 * src.nbytes / copy_ms / 1e6
    print(f"copy: {copy_gbps:.0f} GB/s (read + write)")
    for name in args.case or sorted(CASES):
        fn, values = CASES[name]()
        fn()
        ms = _median_ms(fn, args.calls)
        size = 2 if "bf16" in name else 4
        gbps = values * size / ms / 1e6
        print(f"{name:<12} {ms:8.3f} ms  {gbps:7.0f} GB/s  {gbps / copy_gbps:.2f} of copy")


if __name__ == "__main__":
    main()
