"""Panther's sketched linear layer in its own formulation: T terms, each a pair of low-rank products of
the input expanded over the terms, averaged."""
from __future__ import annotations

import torch


def sketched_linear(x, S1s, S2s, U1s, U2s, bias=None):
    """x (..., in); S1s (T, in, r), S2s (T, r, out), U1s (T, r, out), U2s (T, in, r), bias (out) or None:
    1/(2T)·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i) + bias, through the (T, batch, in) expanded input."""
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
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
