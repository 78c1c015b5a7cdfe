"""Panther's sketched linear layer in its own formulation: T terms, each a pair of low-rank products of
the input expanded over the terms, averaged; and the scheme of its seeded SRHT operators."""
from __future__ import annotations

import math

import torch

from .sketch import srht_matrix

_MASK64 = (1 << 64) - 1


def term_seed(seed: int, stream: int) -> int:
    """A 63-bit seed for one operator of a layer (splitmix64 of seed and stream): layers whose seeds
    differ share no operator."""
    z = (seed + (stream + 1) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) & ((1 << 63) - 1)


def srht_blocks(t: int, r: int, n: int) -> list:
    """Terms per SRHT block of a stacked (T·r, n) operator (r <= n): as few blocks as keep each block's
    rows within n, the terms split as evenly as possible, earlier blocks taking the extra ones."""
    nb = -(-t // max(1, min(t, n // r)))
    base, extra = divmod(t, nb)
    return [base + (b < extra) for b in range(nb)]


def srht_operator(t: int, r: int, n: int, seed: int, stream: int) -> torch.Tensor:
    """The stacked (T·r, n) operator of stream 0 (U1: n = out) or 1 (U2ᵀ: n = in), float64: block b is
    srht_matrix(k_b, n, term_seed(seed, 2b + stream)) · √(k_b / r), k_b its rows, so every entry is ±1/√r
    (Panther's scaled signs, here rows of one Hadamard transform per block)."""
    blocks = []
    for b, terms in enumerate(srht_blocks(t, r, n)):
        k = terms * r
        blocks.append(srht_matrix(k, n, term_seed(seed, 2 * b + stream)) * math.sqrt(terms))
    return torch.cat(blocks)


def srht_sketched_operators(t: int, r: int, fin: int, fout: int, seed: int, dtype=torch.float64, device="cpu"):
    """(U1s (T, r, out), U2s (T, in, r)) of swisk.ops.srht_sketched_linear with this seed."""
    u1 = srht_operator(t, r, fout, seed, 0).view(t, r, fout)
    u2 = srht_operator(t, r, fin, seed, 1).view(t, r, fin).transpose(1, 2)
    return u1.to(device, dtype), u2.contiguous().to(device, dtype)


def srht_sketched_linear(x, S1s, S2s, seed, bias=None):
    """Panther's layer with the seeded SRHT operators, materialised: sketched_linear(x, S1s, S2s, U1s, U2s,
    bias) with (U1s, U2s) = srht_sketched_operators(T, r, in, out, seed)."""
    t, fin, r = S1s.shape
    u1, u2 = srht_sketched_operators(t, r, fin, S2s.shape[2], seed, x.dtype, x.device)
    return sketched_linear(x, S1s, S2s, u1, u2, bias)


def sketched_linear(x, S1s, S2s, U1s, U2s, bias=None):
    """x (..., in); S1s (T, in, r), S2s (T, r, out), U1s (T, r, out), U2s (T, in, r), bias (out) or None:
    1/(2T)·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i) + bias, through the (T, batch, in) expanded input."""
    lead = x.shape[:-1]
    x2 = x.reshape(math.prod(lead), x.shape[-1])
    xe = x2.unsqueeze(0).expand(S1s.shape[0], *x2.shape)
    y = 0.5 * (torch.bmm(torch.bmm(xe, S1s), U1s).mean(0) + torch.bmm(torch.bmm(xe, U2s), S2s).mean(0))
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, y.shape[-1])


def sketched_conv2d(x, S1s, U1s, bias, stride, padding):
    """Panther's SKConv2d: x (B, C, H, W), S1s (L·r, C, kh, kw), U1s (L, r, out), bias (out) or None:
    conv(x, S1s) into the (B, L·r, H', W') space, then each pixel's U1sᵀ combination over L·r, / L."""
    t = torch.nn.functional.conv2d(x, S1s, None, stride, padding)
    b, lr, h, w = t.shape
    u = U1s.reshape(lr, -1).T                                         # (out, L·r)
    y = torch.bmm(u.expand(b, *u.shape), t.reshape(b, lr, h * w)).view(b, -1, h, w) / U1s.shape[0]
    return y if bias is None else y + bias.view(1, -1, 1, 1)
