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
