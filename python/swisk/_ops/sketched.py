"""The sketched linear layer (Panther's SKLinear math) as vendor GEMMs through two (batch, T·r)
intermediates: y = ((x·[S1_1..S1_T])·[U1_1; ..; U1_T] + (x·[U2_1..U2_T])·[S2_1; ..; S2_T]) / (2T) + bias. Plain
torch ops: autograd, double backward, forward mode, vmap and compile come from torch; the (T, batch,
in) expansion of the formulation never exists."""
from __future__ import annotations

import torch

from .._backend import autocast_enabled

_OP = "sketched_linear"


def _check(x, S1s, S2s, U1s, U2s, bias):
    named = {"x": x, "S1s": S1s, "S2s": S2s, "U1s": U1s, "U2s": U2s}
    if bias is not None:
        named["bias"] = bias
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"[{_OP}] {name}: expected a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"[{_OP}] {name}: expected a floating dtype, got {t.dtype}")
        if t.dtype != x.dtype and not autocast_enabled(x.device.type):
            raise TypeError(f"[{_OP}] {name}: dtype {t.dtype} differs from x's {x.dtype}")
        if t.device != x.device:
            raise ValueError(f"[{_OP}] {name}: on {t.device}, x on {x.device}")
    for name in ("S1s", "S2s", "U1s", "U2s"):
        if named[name].dim() != 3:
            raise ValueError(f"[{_OP}] {name}: must be 3-d (num_terms, ...), got shape {tuple(named[name].shape)}")
    t, fin, r = S1s.shape
    out = S2s.shape[2]
    want = {"S1s": (t, fin, r), "S2s": (t, r, out), "U1s": (t, r, out), "U2s": (t, fin, r)}
    for name, shape in want.items():
        if tuple(named[name].shape) != shape:
            raise ValueError(f"[{_OP}] {name}: must be {shape} (num_terms, in, r from S1s; out from S2s), "
                             f"got {tuple(named[name].shape)}")
    if t == 0:
        raise ValueError(f"[{_OP}] S1s: needs at least one term, got num_terms = 0")
    if x.dim() == 0 or x.shape[-1] != fin:
        raise ValueError(f"[{_OP}] x: last dimension must be in_features = {fin}, got shape {tuple(x.shape)}")
    if bias is not None and tuple(bias.shape) != (out,):
        raise ValueError(f"[{_OP}] bias: must be ({out},), got {tuple(bias.shape)}")


def sketched_linear(x, S1s, S2s, U1s, U2s, bias=None):
    """Panther's sketched linear layer: 1/(2T)·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i) + bias.

    Args:
        x: (..., in).
        S1s: (T, in, r) and S2s: (T, r, out), the learned factors; U1s: (T, r, out) and U2s: (T, in, r),
            the fixed random ones (all differentiable here).
        bias: (out,) or None.

    Returns:
        (..., out), from four GEMMs through two (batch, T·r) intermediates (the vendor's GEMM in every
        dtype; fp16/bf16 under autocast accumulate in fp32), any batch and feature sizes.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices or shapes.
    """
    _check(x, S1s, S2s, U1s, U2s, bias)
    if autocast_enabled(x.device.type):
        dt = torch.get_autocast_dtype(x.device.type)
        x, S1s, S2s, U1s, U2s = (t.to(dt) for t in (x, S1s, S2s, U1s, U2s))
        bias = None if bias is None else bias.to(dt)
    t, fin, r = S1s.shape
    x2 = x.reshape(-1, fin)
    # One GEMM per factor, so autograd differentiates only the learned ones: backward is dZ1 = gy·U1ᵀ,
    # dZ2 = gy·S2ᵀ, dS1 = xᵀ·dZ1, dS2 = Z2ᵀ·gy, dx = dZ1·S1ᵀ + dZ2·U2ᵀ (a concatenated [S1 | U2] would
    # also compute the U halves' gradients: a third more backward FLOPs). (T, r, out) is (T·r, out) as is.
    z1 = torch.mm(x2, S1s.transpose(0, 1).reshape(fin, t * r))                  # (batch, T·r)
    z2 = torch.mm(x2, U2s.transpose(0, 1).reshape(fin, t * r))
    c = 0.5 / t
    u1 = U1s.reshape(t * r, -1)
    y = torch.mm(z1, u1) * c if bias is None else torch.addmm(bias, z1, u1, alpha=c)
    y = torch.addmm(y, z2, S2s.reshape(t * r, -1), alpha=c)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def sketched_conv2d(x, S1s, U1s, bias=None, stride=1, padding=0):
    """Panther's sketched convolution: conv2d(x, S1s) into the L·r channels (the vendor's convolution), then
    the fixed U1s combination of each pixel divided by L (the vendor's batched GEMM).

    Args:
        x: (N, C, H, W). S1s: (L·r, C, kh, kw) learned; U1s: (L, r, out) fixed; bias: (out,) or None.
        stride, padding: as torch's conv2d.

    Returns:
        (N, out, H', W').

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices or shapes.
    """
    op = "sketched_conv2d"
    named = {"x": x, "S1s": S1s, "U1s": U1s} if bias is None else {"x": x, "S1s": S1s, "U1s": U1s, "bias": bias}
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"[{op}] {name}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dtype != x.dtype and not autocast_enabled(x.device.type):
            raise TypeError(f"[{op}] {name}: dtype {t.dtype} differs from x's {x.dtype}")
        if t.device != x.device:
            raise ValueError(f"[{op}] {name}: on {t.device}, x on {x.device}")
    if S1s.dim() != 4 or U1s.dim() != 3 or S1s.shape[0] != U1s.shape[0] * U1s.shape[1]:
        raise ValueError(f"[{op}] S1s: must be (L·r, C, kh, kw) with U1s (L, r, out), got {tuple(S1s.shape)} and "
                         f"{tuple(U1s.shape)}")
    if x.dim() != 4 or x.shape[1] != S1s.shape[1]:
        raise ValueError(f"[{op}] x: must be (N, C={S1s.shape[1]}, H, W), got {tuple(x.shape)}")
    if bias is not None and tuple(bias.shape) != (U1s.shape[2],):
        raise ValueError(f"[{op}] bias: must be ({U1s.shape[2]},), got {tuple(bias.shape)}")
    t = torch.nn.functional.conv2d(x, S1s, None, stride, padding)
    b, lr, h, w = t.shape
    # The U1s combination as a batched GEMM over pixels (forward+backward 1.13x Panther's formulation on
    # the CPU against 1.09x for the same product as a 1x1 convolution: 25 interleaved steps, 1 thread).
    u = (U1s.reshape(lr, -1).T / U1s.shape[0]).to(t.dtype)                       # (out, L·r)
    y = torch.matmul(u, t.reshape(b, lr, h * w))
    if bias is not None:
        y = y + bias.to(y.dtype)[:, None]
    return y.view(b, -1, h, w)
