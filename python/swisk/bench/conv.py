"""Benchmark rows of KAN convolution: swisk.ops.kan_conv2d against the materialised formulation
(torch-conv-kan's: the (N, C·n_basis, H, W) basis tensor, then one convolution)."""
from __future__ import annotations

import contextlib

import torch

from .. import config, ops, reference
from .._ops import conv_gemm
from .cases import Case

_GRADS = ("x", "base_weight", "spline_weight", "spline_scaler")


def _setup(batch, c, o, size, kernel, grid_size, order, channels_last):
    def setup(device, dtype, gen):
        f64 = dict(generator=gen, dtype=torch.float64)
        h = 2.0 / grid_size
        grid = (torch.arange(-order, grid_size + order + 1, dtype=torch.float64) * h - 1).expand(c, -1)
        nb = grid_size + order
        fan = c * kernel * kernel
        a = {"x": torch.rand(batch, c, size, size, **f64) * 2.4 - 1.2,
             "base_weight": torch.randn(o, c, kernel, kernel, **f64) / fan ** 0.5,
             "spline_weight": torch.randn(o, c * nb, kernel, kernel, **f64) / fan ** 0.5,
             "spline_scaler": torch.randn(o, c, kernel, kernel, **f64)}
        a = {k: v.to(device, dtype) for k, v in a.items()}
        if channels_last:
            a["x"] = a["x"].contiguous(memory_format=torch.channels_last)
        a = {k: v.requires_grad_() for k, v in a.items()}
        return {**a, "grid": grid.contiguous().to(device, dtype), "k": order}
    return setup


def _args(a):
    return a["x"], a["grid"], a["base_weight"], a["spline_weight"], a["spline_scaler"], a["k"]


@contextlib.contextmanager
def _separate_base():
    """kan_conv's base branch as its own convolution on every device (conv_gemm.MERGE off)."""
    before = dict(conv_gemm.MERGE)
    conv_gemm.MERGE.update({dev: False for dev in ("cpu", "cuda", "mps")})
    try:
        yield
    finally:
        conv_gemm.MERGE.clear()
        conv_gemm.MERGE.update(before)


def _case(batch, c, o, size, kernel, g, goal, channels_last=False, k=3, workspace=None, separate=False,
          devices=None):
    """workspace: swisk.config's workspace_bytes for swisk's whole step (its tiles take a share of it:
    conv_gemm.py); separate: the base branch as its own convolution (conv_gemm.MERGE off)."""
    pads = [kernel // 2] * 4
    out = size  # stride 1, 'same'-size padding
    flops = 2.0 * batch * out * out * o * c * kernel * kernel * (g + k + 1)
    useful = 2.0 * batch * out * out * o * c * kernel * kernel * (k + 2)
    label = f"b{batch} {c}->{o} {size}x{size} {kernel}x{kernel} G={g}" + (" channels_last" if channels_last else "")
    label += f" workspace {workspace >> 20} MiB" if workspace else ""
    label += " base separate" if separate else ""

    @contextlib.contextmanager
    def around():
        with contextlib.ExitStack() as stack:
            if workspace is not None:
                stack.enter_context(config.using(workspace_bytes=workspace))
            if separate:
                stack.enter_context(_separate_base())
            yield

    extra = {} if devices is None else {"devices": devices}
    return Case("kan_conv2d", label, _setup(batch, c, o, size, kernel, g, k, channels_last),
                run=lambda a: ops.kan_conv2d(*_args(a), 1, kernel // 2),
                reference=lambda a: reference.kan_conv(*_args(a), [1, 1], pads, [1, 1], 1),
                grads=_GRADS, flops=flops, useful_flops=useful, goal=goal,
                targets=("cpu: fwdbwd_speedup >= 2", "cpu: fwdbwd_memory_ratio <= 0.125", "cuda: fwdbwd_speedup >= 3"),
                around=around if workspace is not None or separate else None, **extra)


_GPUS = ("cuda", "mps")
CASES = [
    _case(32, 32, 32, 28, 3, 5, "CPU: fwd+bwd >= 2x the reference, <= 1/8 of its peak memory; GPU: >= 3x"),
    _case(32, 32, 32, 28, 3, 5, "as the NCHW row", channels_last=True),
    # GPUs, against the first row: the tile share and the merged base branch, each undone (conv_gemm.py).
    # 16 MiB: tiles of 8 MiB at the GPUs' share, those of the 11-26 and 11-28 runs; 256 MiB: one tile.
    _case(32, 32, 32, 28, 3, 5, "as the NCHW row", workspace=16 << 20, devices=_GPUS),
    _case(32, 32, 32, 28, 3, 5, "as the NCHW row", workspace=256 << 20, devices=_GPUS),
    _case(32, 32, 32, 28, 3, 5, "as the NCHW row", separate=True, devices=_GPUS),
]
