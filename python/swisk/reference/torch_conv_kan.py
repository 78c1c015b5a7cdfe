"""torch-conv-kan's KANConv1DLayer / 2D / 3D (kan_convs/kan_conv.py), in plain torch: the oracle of
swisk.compat.torch_conv_kan and the baseline its example measures against.

What it reproduces, fact by fact: one bias-free nn.ConvNd pair (base, spline) per group, built in group
order, then every conv re-drawn by kaiming_uniform_(nonlinearity='linear') (so the draws match); a
norm_layer(output_dim // groups, **norm_kwargs) and a PReLU per group; ConvNd-matching DropoutNd; a
float32 linspace grid held as a plain attribute (not in the state_dict, moved to x's device but kept
float32, so knot differences are float32 even for float64 inputs); Cox–de Boor with the left
knot-difference guarded against zero; a per-group loop of prelu(norm(base + spline)), dropout, then cat.
"""
from __future__ import annotations

import torch
import torch.nn as nn


def torch_conv_kan_grid(grid_size: int, spline_order: int, grid_range) -> torch.Tensor:
    """The grid_size + 2·spline_order + 1 knots, float32, spline_order cells past each end of grid_range."""
    lo, hi = grid_range[0], grid_range[1]
    h = (hi - lo) / grid_size
    return torch.linspace(lo - h * spline_order, hi + h * spline_order, grid_size + 2 * spline_order + 1,
                          dtype=torch.float32)


def torch_conv_kan_bases(x: torch.Tensor, grid: torch.Tensor, spline_order: int) -> torch.Tensor:
    """(N, C, *S) -> (N, C·n_basis, *S), channel c·n_basis + j; grid 1-d, used in its own dtype."""
    xe = x.unsqueeze(-1)
    g = grid.to(x.device)
    b = ((xe >= g[:-1]) & (xe < g[1:])).to(x.dtype)
    for k in range(1, spline_order + 1):
        left, right = g[:-(k + 1)], g[k:-1]
        span = torch.where(right == left, torch.ones_like(right), right - left)  # in the grid's dtype
        b = (xe - left) / span * b[..., :-1] + (g[k + 1:] - xe) / (g[k + 1:] - g[1:-k]) * b[..., 1:]
    return b.movedim(-1, 2).flatten(1, 2)


class KANConvNDRef(nn.Module):
    """torch-conv-kan's KANConvNDLayer: conv_class / norm_class of the given ndim."""

    def __init__(self, conv_class, norm_class, input_dim, output_dim, spline_order, kernel_size, groups=1,
                 padding=0, stride=1, dilation=1, ndim: int = 2, grid_size=5, base_activation=nn.GELU,
                 grid_range=[-1, 1], dropout=0.0, **norm_kwargs):
        super().__init__()
        self.inputdim, self.outdim = input_dim, output_dim
        self.spline_order, self.kernel_size = spline_order, kernel_size
        self.padding, self.stride, self.dilation, self.groups = padding, stride, dilation, groups
        self.ndim, self.grid_size = ndim, grid_size
        self.base_activation = base_activation()
        self.grid_range, self.norm_kwargs = grid_range, norm_kwargs
        self.dropout = None
        if dropout > 0 and 1 <= ndim <= 3:
            self.dropout = (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)[ndim - 1](p=dropout)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if input_dim % groups != 0:
            raise ValueError("input_dim must be divisible by groups")
        if output_dim % groups != 0:
            raise ValueError("output_dim must be divisible by groups")
        cin, cout = input_dim // groups, output_dim // groups
        n_basis = grid_size + spline_order

        def conv(c):
            return conv_class(c, cout, kernel_size, stride, padding, dilation, groups=1, bias=False)

        self.base_conv = nn.ModuleList(conv(cin) for _ in range(groups))
        self.spline_conv = nn.ModuleList(conv(n_basis * input_dim // groups) for _ in range(groups))
        self.layer_norm = nn.ModuleList(norm_class(cout, **norm_kwargs) for _ in range(groups))
        self.prelus = nn.ModuleList(nn.PReLU() for _ in range(groups))
        self.grid = torch_conv_kan_grid(grid_size, spline_order, grid_range)
        for c in [*self.base_conv, *self.spline_conv]:
            nn.init.kaiming_uniform_(c.weight, nonlinearity="linear")

    def forward_kan(self, x, group_index):
        base = self.base_conv[group_index](self.base_activation(x))
        spline = self.spline_conv[group_index](torch_conv_kan_bases(x, self.grid, self.spline_order))
        y = self.prelus[group_index](self.layer_norm[group_index](base + spline))
        return y if self.dropout is None else self.dropout(y)

    def forward(self, x):
        parts = torch.split(x, self.inputdim // self.groups, dim=1)
        return torch.cat([self.forward_kan(p, i).clone() for i, p in enumerate(parts)], dim=1)


class KANConv1DLayer(KANConvNDRef):
    def __init__(self, input_dim, output_dim, kernel_size, spline_order=3, groups=1, padding=0, stride=1, dilation=1,
                 grid_size=5, base_activation=nn.GELU, grid_range=[-1, 1], dropout=0.0, norm_layer=nn.InstanceNorm1d,
                 **norm_kwargs):
        super().__init__(nn.Conv1d, norm_layer, input_dim, output_dim, spline_order, kernel_size, groups=groups,
                         padding=padding, stride=stride, dilation=dilation, ndim=1, grid_size=grid_size,
                         base_activation=base_activation, grid_range=grid_range, dropout=dropout, **norm_kwargs)


class KANConv2DLayer(KANConvNDRef):
    def __init__(self, input_dim, output_dim, kernel_size, spline_order=3, groups=1, padding=0, stride=1, dilation=1,
                 grid_size=5, base_activation=nn.GELU, grid_range=[-1, 1], dropout=0.0, norm_layer=nn.InstanceNorm2d,
                 **norm_kwargs):
        super().__init__(nn.Conv2d, norm_layer, input_dim, output_dim, spline_order, kernel_size, groups=groups,
                         padding=padding, stride=stride, dilation=dilation, ndim=2, grid_size=grid_size,
                         base_activation=base_activation, grid_range=grid_range, dropout=dropout, **norm_kwargs)


class KANConv3DLayer(KANConvNDRef):
    def __init__(self, input_dim, output_dim, kernel_size, spline_order=3, groups=1, padding=0, stride=1, dilation=1,
                 grid_size=5, base_activation=nn.GELU, grid_range=[-1, 1], dropout=0.0, norm_layer=nn.InstanceNorm3d,
                 **norm_kwargs):
        super().__init__(nn.Conv3d, norm_layer, input_dim, output_dim, spline_order, kernel_size, groups=groups,
                         padding=padding, stride=stride, dilation=dilation, ndim=3, grid_size=grid_size,
                         base_activation=base_activation, grid_range=grid_range, dropout=dropout, **norm_kwargs)
