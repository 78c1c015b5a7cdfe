"""torch-conv-kan's import path (``from kan_convs import KANConv2DLayer``):
``from swisk.compat.torch_conv_kan import KANConv1DLayer, KANConv2DLayer, KANConv3DLayer``.

The same constructor, attributes, submodules and state_dict names (``base_conv.{g}.weight``,
``spline_conv.{g}.weight``, ``layer_norm.{g}.*``, ``prelus.{g}.weight``), the same random draws at
construction and the same numbers; the convolutions of all groups are one swisk.ops.kan_conv{n}d call
(the groups' weights stacked along dim 0 are grouped-conv weights), which never materialises the
(N, C·n_basis, *S) basis tensor. Per group then, as torch-conv-kan: norm, PReLU, dropout; then cat.

Deliberate differences: ``grid`` is a non-persistent buffer (so it follows .to(device/dtype), still
absent from the state_dict); for float64 inputs the knot differences are float64 differences of the
float32-rounded knots, where torch-conv-kan subtracts in float32 (the bases then differ by ~1e-8
relative); "[KANConv2DLayer] arg: ..." errors, raised at construction for arguments torch-conv-kan
accepts and then fails on (a non-increasing grid_range, dropout outside [0, 1], ...) and at forward for
an input without input_dim channels.
"""
from __future__ import annotations

import numbers

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import ops
from ..nn._checks import check_input, int_arg, range_arg, real_arg
from ..reference.torch_conv_kan import torch_conv_kan_grid

_OPS = (ops.kan_conv1d, ops.kan_conv2d, ops.kan_conv3d)
_CONVS = (F.conv1d, F.conv2d, F.conv3d)


def _op_activation(module) -> str | None:
    """The op's activation name for the modules it computes itself; None for any other."""
    kind = type(module)
    if kind is nn.SiLU:
        return "silu"
    if kind is nn.GELU and module.approximate == "none":
        return "gelu"
    return "identity" if kind is nn.Identity else None


def _ints_arg(layer, arg, v, nd, minimum):
    if isinstance(v, (tuple, list)):
        if len(v) != nd:
            raise ValueError(f"[{layer}] {arg}: expected an int or {nd} ints, got {tuple(v)}")
        return tuple(int_arg(layer, f"{arg}[{i}]", e, minimum) for i, e in enumerate(v))
    return int_arg(layer, arg, v, minimum)


def _padding_arg(layer, v, nd, stride):
    if isinstance(v, str):
        if v not in ("same", "valid"):
            raise ValueError(f"[{layer}] padding: expected an int, {nd} ints, 'same' or 'valid', got {v!r}")
        if v == "same" and any(s != 1 for s in (stride if isinstance(stride, tuple) else (stride,))):
            raise ValueError(f"[{layer}] padding: 'same' needs stride 1, got stride {stride}")
        return v
    return _ints_arg(layer, "padding", v, nd, 0)


def _callable_arg(layer, arg, v):
    """torch-conv-kan takes classes (nn.GELU, nn.InstanceNorm2d) and instantiates them."""
    if isinstance(v, nn.Module) or not callable(v):
        hint = " (pass the class, e.g. nn.GELU, not an instance)" if isinstance(v, nn.Module) else ""
        raise TypeError(f"[{layer}] {arg}: expected a class to instantiate, got {type(v).__name__}{hint}")
    return v


class KANConvNDLayer(nn.Module):
    """torch-conv-kan's KANConvNDLayer on swisk.ops.kan_conv{ndim}d (see the module docstring)."""

    def __init__(self, conv_class, norm_class, input_dim, output_dim, spline_order, kernel_size, groups=1,
                 padding=0, stride=1, dilation=1, ndim: int = 2, grid_size=5, base_activation=nn.GELU,
                 grid_range=[-1, 1], dropout=0.0, **norm_kwargs):  # noqa: B006 (torch-conv-kan's signature)
        super().__init__()
        from .. import build_info  # swisk is fully imported by the time a layer is built

        ndim = int_arg("KANConvNDLayer", "ndim", ndim, 1, 3)
        name = f"KANConv{ndim}DLayer"
        self.inputdim = int_arg(name, "input_dim", input_dim, 1)
        self.outdim = int_arg(name, "output_dim", output_dim, 1)
        self.groups = int_arg(name, "groups", groups, 1)
        if input_dim % groups:
            raise ValueError(f"[{name}] input_dim: must be divisible by groups ({groups}), got {input_dim}")
        if output_dim % groups:
            raise ValueError(f"[{name}] output_dim: must be divisible by groups ({groups}), got {output_dim}")
        self.spline_order = int_arg(name, "spline_order", spline_order, 0, build_info()["max_spline_order"])
        self.grid_size = int_arg(name, "grid_size", grid_size, 1)
        self.kernel_size = _ints_arg(name, "kernel_size", kernel_size, ndim, 1)
        self.stride = _ints_arg(name, "stride", stride, ndim, 1)
        self.dilation = _ints_arg(name, "dilation", dilation, ndim, 1)
        self.padding = _padding_arg(name, padding, ndim, self.stride)
        self.grid_range = grid_range
        lo, hi = range_arg(name, "grid_range", grid_range)
        p = real_arg(name, "dropout", dropout, 0.0, 1.0)
        self.ndim, self.norm_kwargs = ndim, norm_kwargs
        self.base_activation = _callable_arg(name, "base_activation", base_activation)()
        self.dropout = None
        if p > 0:
            self.dropout = (nn.Dropout1d, nn.Dropout2d, nn.Dropout3d)[ndim - 1](p=p)
        cin, cout = input_dim // groups, output_dim // groups
        n_basis = self.grid_size + self.spline_order

        def conv(c):
            return conv_class(c, cout, kernel_size, stride, padding, dilation, groups=1, bias=False)

        norm_class = _callable_arg(name, "norm_layer", norm_class)
        self.base_conv = nn.ModuleList(conv(cin) for _ in range(groups))
        self.spline_conv = nn.ModuleList(conv(n_basis * cin) for _ in range(groups))
        self.layer_norm = nn.ModuleList(norm_class(cout, **norm_kwargs) for _ in range(groups))
        self.prelus = nn.ModuleList(nn.PReLU() for _ in range(groups))
        self.register_buffer("grid", torch_conv_kan_grid(grid_size, spline_order, (lo, hi)), persistent=False)
        for c in [*self.base_conv, *self.spline_conv]:
            nn.init.kaiming_uniform_(c.weight, nonlinearity="linear")

    def _weight(self, convs):
        return convs[0].weight if len(convs) == 1 else torch.cat([c.weight for c in convs])

    def _check(self, x):
        name = f"KANConv{self.ndim}DLayer"
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"[{name}] input: expected a torch.Tensor, got {type(x).__name__}")
        if x.dim() != self.ndim + 2 or x.shape[1] != self.inputdim:
            raise ValueError(f"[{name}] input: expected (batch, input_dim={self.inputdim}, {self.ndim} spatial "
                             f"sizes), got shape {tuple(x.shape)}")
        check_input(name, x, x.shape[-1], self.spline_conv[0].weight)  # device and dtype

    def forward(self, x):
        self._check(x)
        nd, g = self.ndim, self.groups
        bw, sw = self._weight(self.base_conv), self._weight(self.spline_conv)
        # one knot row per input channel, materialised: kan_conv's knot check reads the grid as contiguous
        grid = self.grid.to(sw.dtype).expand(self.inputdim, -1).contiguous()
        act = _op_activation(self.base_activation)
        args = (self.spline_order, self.stride, self.padding, self.dilation, g)
        if act is not None:
            y = _OPS[nd - 1](x, grid, bw, sw, None, *args, act)
        else:
            y = _OPS[nd - 1](x, grid, None, sw, None, *args, "identity")
            y = y + _CONVS[nd - 1](self.base_activation(x), bw, None, self.stride, self.padding, self.dilation, g)
        out = []
        for i, yg in enumerate(y.split(self.outdim // g, dim=1)):
            yg = self.prelus[i](self.layer_norm[i](yg))
            out.append(yg if self.dropout is None else self.dropout(yg))
        return out[0] if g == 1 else torch.cat(out, dim=1)


def _layer(nd, conv_class, norm_default):
    def __init__(self, input_dim, output_dim, kernel_size, spline_order=3, groups=1, padding=0, stride=1, dilation=1,
                 grid_size=5, base_activation=nn.GELU, grid_range=[-1, 1], dropout=0.0, norm_layer=norm_default,
                 **norm_kwargs):  # noqa: B006
        KANConvNDLayer.__init__(self, conv_class, norm_layer, input_dim, output_dim, spline_order, kernel_size,
                                groups=groups, padding=padding, stride=stride, dilation=dilation, ndim=nd,
                                grid_size=grid_size, base_activation=base_activation, grid_range=grid_range,
                                dropout=dropout, **norm_kwargs)

    name = f"KANConv{nd}DLayer"
    doc = f"torch-conv-kan's {name} (default norm_layer nn.{norm_default.__name__}) on swisk.ops.kan_conv{nd}d."
    return type(name, (KANConvNDLayer,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})


KANConv1DLayer = _layer(1, nn.Conv1d, nn.InstanceNorm1d)
KANConv2DLayer = _layer(2, nn.Conv2d, nn.InstanceNorm2d)
KANConv3DLayer = _layer(3, nn.Conv3d, nn.InstanceNorm3d)

__all__ = ["KANConvNDLayer", "KANConv1DLayer", "KANConv2DLayer", "KANConv3DLayer"]
