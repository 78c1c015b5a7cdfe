"""KAN convolutions: efficient-kan's KANLinear applied to every patch (base_weight, spline_weight,
spline_scaler per patch element, one knot vector per input channel) with nn.Conv's arguments, on
swisk.ops.kan_conv{1,2,3}d (the GEMM route: no (N, C·n_basis, *S) basis tensor, no whole im2col)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import ops
from .._backend import autocast_enabled
from ..reference.spline import bspline_basis, kan_grid
from ._checks import FLOAT_DTYPES, LAYER_RAISES_DOC, SPLINE_ARGS_DOC, flag_arg, int_arg
from .kan import _check_args

_OPS = {1: ops.kan_conv1d, 2: ops.kan_conv2d, 3: ops.kan_conv3d}
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _activation_name(act) -> str | None:
    """The op's own name for a base activation module, or None (then the base branch runs in torch)."""
    if type(act) is torch.nn.SiLU:
        return "silu"
    if type(act) is torch.nn.GELU and act.approximate == "none":
        return "gelu"
    if type(act) is torch.nn.Identity:
        return "identity"
    return None


def _sizes(layer: str, arg: str, v, d: int, minimum: int) -> tuple:
    if isinstance(v, int) and not isinstance(v, bool):
        v = (v,) * d
    if not isinstance(v, (tuple, list)) or len(v) != d:
        raise TypeError(f"[{layer}] {arg}: expected an int or {d} ints, got {v!r}")
    return tuple(int_arg(layer, arg, e, minimum) for e in v)


class _KANConvNd(torch.nn.Module):
    d = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 grid_size=5, spline_order=3, scale_noise=0.1, scale_base=1.0, scale_spline=1.0,
                 enable_standalone_scale_spline=True, base_activation=torch.nn.SiLU, grid_eps=0.02,
                 grid_range=[-1, 1]):  # noqa: B006 (efficient-kan's signature)
        super().__init__()
        name, d = type(self).__name__, self.d
        a = _check_args(name, grid_size, spline_order, scale_noise, scale_base, scale_spline, base_activation,
                        grid_eps, grid_range)
        self.in_channels = int_arg(name, "in_channels", in_channels, 1)
        self.out_channels = int_arg(name, "out_channels", out_channels, 1)
        self.groups = int_arg(name, "groups", groups, 1)
        for arg, v in (("in_channels", self.in_channels), ("out_channels", self.out_channels)):
            if v % self.groups:
                raise ValueError(f"[{name}] groups: must divide {arg}={v}, got {self.groups}")
        self.kernel_size = _sizes(name, "kernel_size", kernel_size, d, 1)
        self.stride = _sizes(name, "stride", stride, d, 1)
        self.dilation = _sizes(name, "dilation", dilation, d, 1)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"[{name}] padding: expected an int, {d} ints, 'same' or 'valid', got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"[{name}] padding: 'same' needs stride 1, got stride {self.stride}")
            self.padding = padding
        else:
            self.padding = _sizes(name, "padding", padding, d, 0)
        g, k = self.grid_size, self.spline_order = a["grid_size"], a["spline_order"]
        lo, hi = a["grid_range"]
        self._grid_range = (lo, hi)
        self.register_buffer("grid", self._initial_grid())
        cg = self.in_channels // self.groups
        self.base_weight = torch.nn.Parameter(torch.empty(self.out_channels, cg, *self.kernel_size))
        self.spline_weight = torch.nn.Parameter(torch.empty(self.out_channels, cg * (g + k), *self.kernel_size))
        self.enable_standalone_scale_spline = flag_arg(name, "enable_standalone_scale_spline",
                                                       enable_standalone_scale_spline)
        if self.enable_standalone_scale_spline:
            self.spline_scaler = torch.nn.Parameter(torch.empty(self.out_channels, cg, *self.kernel_size))
        self.scale_noise, self.scale_base, self.scale_spline = a["scale_noise"], a["scale_base"], a["scale_spline"]
        self.base_activation = a["base_activation"]()
        self.grid_eps = a["grid_eps"]
        self.reset_parameters()

    def _initial_grid(self) -> torch.Tensor:
        """The knots of grid_range, extended by spline_order on each side, for every input."""
        return kan_grid(self.in_channels, self.grid_size, self.spline_order, self._grid_range)

    def reset_parameters(self):
        """efficient-kan's initialisation per patch element: kaiming-uniform base weights and scalers
        (fan-in C/groups·prod(kernel)), spline weights fitted to small noise on the grid_range knots; the
        knots themselves back on grid_range (a layer built on the meta device is whole after to_empty)."""
        torch.nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5) * self.scale_base)
        if self.spline_weight.is_meta:  # shapes only (torch.device("meta")): no curve to fit
            return
        with torch.no_grad():
            self.grid.copy_(self._initial_grid())  # the knots too, as torch's layers reset their buffers
            g, k = self.grid_size, self.spline_order
            o, cg, kk = self.out_channels, self.in_channels // self.groups, math.prod(self.kernel_size)
            noise = (torch.rand(g + 1, o * cg * kk) - 0.5) * self.scale_noise / g
            knots = self.grid[:1].double()
            pts = knots[0, k:k + g + 1].unsqueeze(1)                       # the g + 1 knots of grid_range
            basis = bspline_basis(pts, knots, k)[:, 0]                     # (g + 1, n_basis)
            coeff = torch.linalg.lstsq(basis, noise.double()).solution     # (n_basis, O·Cg·K)
            scale = 1.0 if self.enable_standalone_scale_spline else self.scale_spline
            coeff = coeff.view(g + k, o, cg, kk).permute(1, 2, 0, 3).reshape(self.spline_weight.shape)
            self.spline_weight.copy_(scale * coeff)
            if self.enable_standalone_scale_spline:
                torch.nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5) * self.scale_spline)

    def _check(self, x):
        name, d = type(self).__name__, self.d
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"[{name}] input: expected a torch.Tensor, got {type(x).__name__}")
        if x.dtype not in FLOAT_DTYPES:
            raise TypeError(f"[{name}] input: dtype {x.dtype} is not supported")
        p = self.spline_weight
        if x.device != p.device:
            raise ValueError(f"[{name}] input: on device {x.device}, but the layer is on {p.device}")
        if x.dtype != p.dtype and not autocast_enabled(x.device.type):
            raise TypeError(f"[{name}] input: dtype {x.dtype} differs from the layer's {p.dtype}")
        if x.dim() < d + 1 or x.shape[-d - 1] != self.in_channels:
            raise ValueError(f"[{name}] input: expected (N, in_channels={self.in_channels}, {d} spatial dims), "
                             f"got shape {tuple(x.shape)}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check(x)
        scaler = self.spline_scaler if self.enable_standalone_scale_spline else None
        conv = _OPS[self.d]
        geo = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups)
        act = _activation_name(self.base_activation)
        if act is not None:
            return conv(x, self.grid, self.base_weight, self.spline_weight, scaler, self.spline_order,
                        base_activation=act, **geo)
        spline = conv(x, self.grid, None, self.spline_weight, scaler, self.spline_order, **geo)
        lead = x.shape[:x.dim() - self.d - 1]  # torch's convolutions take one batch dim at most
        base = _CONV[self.d](self.base_activation(x.reshape(-1, *x.shape[len(lead):])), self.base_weight, None, **geo)
        return base.reshape(*lead, *base.shape[1:]) + spline

    def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0) -> torch.Tensor:
        """efficient-kan's regulariser on the spline weights, each (output, patch element) as a feature."""
        o, cg = self.out_channels, self.in_channels // self.groups
        l1 = self.spline_weight.view(o, cg, self.grid_size + self.spline_order, -1).abs().mean(2)
        act = l1.sum()
        p = l1 / act
        return regularize_activation * act + regularize_entropy * -(p * p.log()).sum()

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"grid_size={self.grid_size}, spline_order={self.spline_order}")


def _conv_doc(d: int, inputs: str) -> str:
    return (f"""KAN convolution over {inputs}; see swisk.ops.kan_conv{d}d.

    Args:
        in_channels, out_channels, kernel_size, stride, padding, dilation, groups: as nn.Conv{d}d's.
""" + SPLINE_ARGS_DOC + "        enable_standalone_scale_spline: whether spline_scaler exists.\n\n" + LAYER_RAISES_DOC)


class KANConv1d(_KANConvNd):
    __doc__ = _conv_doc(1, "(N, C, L) inputs")
    d = 1


class KANConv2d(_KANConvNd):
    __doc__ = _conv_doc(2, "(N, C, H, W) inputs (NCHW or channels_last)")
    d = 2


class KANConv3d(_KANConvNd):
    __doc__ = _conv_doc(3, "(N, C, D, H, W) inputs")
    d = 3
