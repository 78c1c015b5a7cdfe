"""KAN convolution in torch-conv-kan's formulation: conv(act(x), base_weight) + conv(basis(x),
spline_weight·scaler) with the bases as channels c·n_basis + j, activations and bases zero-padded."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .spline import bspline_basis

ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "identity": lambda t: t}
_CONV = (F.conv1d, F.conv2d, F.conv3d)


def torch_pads(padding) -> list:
    """(before_0, after_0, before_1, after_1, ...) -> F.pad's order (last dimension first)."""
    pairs = [padding[i:i + 2] for i in range(0, len(padding), 2)]
    return [p for pair in reversed(pairs) for p in pair]


def scaled_spline_weight(spline_weight, spline_scaler):
    """spline_weight (O, Cg·n_basis, *K) times spline_scaler (O, Cg, *K) on each channel's n_basis rows."""
    if spline_scaler is None:
        return spline_weight
    o, cg = spline_scaler.shape[:2]
    k = spline_weight.shape[2:]
    nb = spline_weight.shape[1] // cg if cg else 0  # explicit sizes: any of them may be 0
    return (spline_weight.view(o, cg, nb, *k) * spline_scaler.unsqueeze(2)).view(spline_weight.shape)


def kan_conv(x, grid, base_weight, spline_weight, spline_scaler, spline_order, stride, padding, dilation, groups,
             base_activation="silu"):
    """x (..., C, *S) with d = spline_weight.dim() - 2 spatial dims; grid (C, n_knots); weights as
    swisk.ops.kan_conv2d takes them; padding (before, after) per spatial dim. -> (..., O, *S_out)."""
    d = spline_weight.dim() - 2
    conv = _CONV[d - 1]
    c, spatial = x.shape[-d - 1], x.shape[-d:]
    lead = x.shape[:-d - 1]
    o = spline_weight.shape[0]
    if c == 0 or o == 0:  # torch's convolutions refuse no outputs and drop them for no inputs; the empty sum is 0
        out = [(s + padding[2 * i] + padding[2 * i + 1] - dilation[i] * (spline_weight.shape[2 + i] - 1) - 1)
               // stride[i] + 1 for i, s in enumerate(spatial)]
        return x.new_zeros(*lead, o, *out)
    xb = x.reshape(lead.numel(), c, *spatial)
    pads = torch_pads(padding)
    bases = bspline_basis(xb.movedim(1, -1), grid, spline_order)       # (N, *S, C, n_basis)
    bases = bases.movedim(-2, 1).movedim(-1, 2).flatten(1, 2)          # (N, C·n_basis, *S)
    w = scaled_spline_weight(spline_weight, spline_scaler)
    y = conv(F.pad(bases, pads), w, None, stride, 0, dilation, groups)
    if base_weight is not None:
        act = ACTIVATIONS[base_activation](xb)
        y = y + conv(F.pad(act, pads), base_weight, None, stride, 0, dilation, groups)
    return y.reshape(*lead, *y.shape[1:])
