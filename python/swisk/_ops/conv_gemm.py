"""kan_conv on the vendor's route. Per tile of output rows, swisk's kan_expand writes the bases of the
padded input pixels the tile reads, E (pixels × C·n_basis, channels-last; padding is -inf, whose bases
are 0), once per pixel; the vendor's convolution (oneDNN / cuDNN / MPS through torch, an implicit GEMM)
multiplies E by spline_weight·scaler, and the base branch is its convolution of act(x). Backward
regenerates E, takes dE and the weight gradient from the vendor's convolution backward, and one
kan_contract per input pixel turns dE into dx. Neither the (N, C·n_basis, *S) basis tensor of the whole
input nor an im2col is ever formed."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import config
from ..reference.conv import ACTIVATIONS, scaled_spline_weight, torch_pads

_CONV = (F.conv1d, F.conv2d, F.conv3d)
_LOW = (torch.float16, torch.bfloat16)
# Tiles take an eighth of workspace_bytes: at b32 32->32 28x28 as fast as a quarter, and the peak is
# then 1/8 to 1/12 of the formulation's (bench, 1 and 2 threads).
TILE_SHARE = 8


class Geometry:
    """Sizes of one call: x (..., C, *S) viewed as (N, C, *S), kernel K, groups G, output (N, O, *S_out)."""

    def __init__(self, x, sw, k, stride, padding, dilation, groups):
        d = sw.dim() - 2
        self.d, self.stride, self.padding, self.dilation, self.groups = d, stride, padding, dilation, groups
        self.c, self.spatial, self.lead = x.shape[-d - 1], tuple(x.shape[-d:]), tuple(x.shape[:-d - 1])
        self.n = math.prod(self.lead)
        self.o, self.kernel = sw.shape[0], tuple(sw.shape[2:])
        self.nb = sw.shape[1] // (self.c // groups) if self.c else 0
        self.padded = tuple(s + padding[2 * i] + padding[2 * i + 1] for i, s in enumerate(self.spatial))
        self.out = tuple((p - dilation[i] * (kd - 1) - 1) // stride[i] + 1
                         for i, (p, kd) in enumerate(zip(self.padded, self.kernel)))
        self.pix = math.prod(self.out)
        self.line = math.prod(self.padded[1:])  # padded pixels per row of the first spatial dim

    def rows_in(self, o0, o1):
        """Padded input rows (first spatial dim) that output rows o0..o1 read."""
        return o0 * self.stride[0], (o1 - 1) * self.stride[0] + self.dilation[0] * (self.kernel[0] - 1) + 1

    def tiles(self, elsize: int, buffers: int):
        """(n0, n1, o0, o1): images n0..n1, and rows o0..o1 of the first output dim when one image does
        not fit (E of a tile, with dE in backward, within a share of the workspace)."""
        per_row = max(1, self.line * (self.c * self.nb + self.c) * elsize * buffers)  # one padded input row
        rows = max(1, config.get("workspace_bytes") // TILE_SHARE // per_row)
        if rows >= self.padded[0]:
            per = max(1, rows // self.padded[0])
            return [(n0, min(self.n, n0 + per), 0, self.out[0]) for n0 in range(0, self.n, per)]
        span = self.dilation[0] * (self.kernel[0] - 1) + 1
        per = max(1, (rows - span) // self.stride[0] + 1)
        return [(n, n + 1, o0, min(self.out[0], o0 + per)) for n in range(self.n) for o0 in range(0, self.out[0], per)]


def pad(x, g: Geometry, value: float):
    return F.pad(x.reshape(g.n, g.c, *g.spatial), torch_pads(g.padding), value=value)


def channels_last(x, d: int) -> bool:
    fmt = {2: torch.channels_last, 3: torch.channels_last_3d}.get(d)
    return fmt is not None and x.dim() == d + 2 and not x.is_contiguous() and x.is_contiguous(memory_format=fmt)


def _empty_like_output(x, g: Geometry, dtype):
    """(N, O, *S_out), channels_last when x is."""
    if channels_last(x, g.d):
        return torch.empty(g.n, *g.out, g.o, dtype=dtype, device=x.device).movedim(-1, 1)
    return torch.empty(g.n, g.o, *g.out, dtype=dtype, device=x.device)


class _Tile:
    """One tile: its padded input pixels (rows of C channels) and their bases E as the vendor's
    convolution takes them, (n, C·n_basis, R, *rest) with channels-last strides. The expansion kernels
    see m consecutive pixels as one row of m·C features (same memory), so few channels still fill
    the vector lanes."""

    def __init__(self, xcl, tile, g: Geometry, grids, k, expand, bufs):
        n0, n1, o0, o1 = tile
        self.r0, r1 = g.rows_in(o0, o1)
        self.src = xcl[n0:n1, self.r0:r1]                       # (n, R, *rest, C), a view
        q = self.src.numel() // g.c
        self.m = _pixels_per_row(q, g.c)
        if self.m not in grids:
            grids[self.m] = grids[1].repeat(self.m, 1)
        self.grid = grids[self.m]
        xb = bufs["x"][:q * g.c]
        xb.view(self.src.shape).copy_(self.src)
        self.x = xb.view(q // self.m, self.m * g.c)
        e = bufs["e"][:q * g.c * g.nb].view(q // self.m, -1)
        self.k, self.expand = k, expand
        expand(self.x, self.grid, k, 0, False, e)
        self.e = e.view(*self.src.shape[:-1], g.c * g.nb).movedim(-1, 1)

    def contract(self, contract, de):
        """dx (q, C) of the tile's pixels from dE (n, C·n_basis, R, *rest)."""
        de = de.movedim(1, -1).contiguous().view(self.x.shape[0], -1)
        dx = torch.empty_like(self.x)
        contract(self.x, self.grid, de, self.k, 1, False, dx)
        return dx.view(self.src.shape)


def _pixels_per_row(q: int, c: int) -> int:
    """The largest divisor m of q with m·C <= 64 (at least 1)."""
    for m in range(max(1, 64 // max(c, 1)), 0, -1):
        if q % m == 0:
            return m
    return 1


def _buffers(g: Geometry, tiles, dtype, device):
    q = max((t[1] - t[0]) * (g.rows_in(t[2], t[3])[1] - g.rows_in(t[2], t[3])[0]) * g.line for t in tiles)
    return {"x": torch.empty(q * g.c, dtype=dtype, device=device),
            "e": torch.empty(q * g.c * g.nb, dtype=dtype, device=device)}


def forward(expand, x, grid, bw, sw, sc, k, stride, padding, dilation, groups, act):
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    conv = _CONV[g.d - 1]
    y = _empty_like_output(x, g, x.dtype)
    if y.numel():
        if g.c * g.nb == 0:
            y.zero_()
        else:
            w = scaled_spline_weight(sw, sc)
            xcl = pad(x, g, float("-inf")).movedim(1, -1)
            tiles = g.tiles(x.element_size(), 1)
            bufs, grids = _buffers(g, tiles, x.dtype, x.device), {1: grid}
            for tile in tiles:
                t = _Tile(xcl, tile, g, grids, k, expand, bufs)
                y[tile[0]:tile[1], :, tile[2]:tile[3]] = conv(t.e, w, None, stride, 0, dilation, groups)
        if bw is not None and g.c:  # no input channels: the empty sum, 0
            y += conv(pad(ACTIVATIONS[act](x), g, 0.0), bw, None, stride, 0, dilation, groups)
    return y.view(*g.lead, *y.shape[1:])


def backward(expand, contract, x, grid, bw, sw, sc, gy, k, stride, padding, dilation, groups, act, need_x=True,
             need_weights=True):
    """(grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler); absent weights and unneeded
    gradients get (0,), and nothing of those is computed (without need_x: e.g. a network's first layer)."""
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    acc = torch.float32 if x.dtype in _LOW else x.dtype
    gy = gy.reshape(g.n, g.o, *g.out)
    xcl = pad(x, g, float("-inf")).movedim(1, -1)
    dxcl = torch.zeros(xcl.shape, dtype=x.dtype, device=x.device) if need_x else None  # (N, *S_padded, C)
    gw = torch.zeros(sw.shape, dtype=acc, device=x.device) if need_weights else None
    mask = [need_x, need_weights, False]
    if gy.numel() and g.c * g.nb and (need_x or need_weights):
        w = scaled_spline_weight(sw, sc)
        tiles = g.tiles(x.element_size(), 2)
        bufs, grids = _buffers(g, tiles, x.dtype, x.device), {1: grid}
        for tile in tiles:
            t = _Tile(xcl, tile, g, grids, k, expand, bufs)
            de, dw, _ = torch.ops.aten.convolution_backward(
                gy[tile[0]:tile[1], :, tile[2]:tile[3]], t.e, w, None, list(stride), [0] * g.d, list(dilation),
                False, [0] * g.d, groups, mask)
            if need_weights:
                gw += dw
            if need_x:
                dxcl[tile[0]:tile[1], t.r0:t.r0 + t.src.shape[1]] += t.contract(contract, de)
    crop = tuple(slice(g.padding[2 * i], g.padding[2 * i] + s) for i, s in enumerate(g.spatial))
    dx = dxcl[(slice(None), *crop)].movedim(-1, 1) if need_x else None
    gbw = torch.zeros_like(bw) if bw is not None and need_weights else x.new_zeros(0)
    if bw is not None and g.c and gy.numel() and (need_x or need_weights):
        xr = x.reshape(g.n, g.c, *g.spatial)
        gap, gb, _ = torch.ops.aten.convolution_backward(
            gy, pad(ACTIVATIONS[act](xr), g, 0.0), bw, None, list(stride), [0] * g.d, list(dilation), False,
            [0] * g.d, groups, mask)
        if need_weights:
            gbw = gb
        if need_x:
            dx = dx + gap[(slice(None), slice(None), *crop)] * _act_derivative(act, xr)
    dx = dx.reshape(x.shape).contiguous() if need_x else x.new_zeros(0)
    if not need_weights:
        return dx, gbw, x.new_zeros(0), x.new_zeros(0)
    gsw, gsc = _unpack(gw, sw, sc, g, x.dtype)
    return dx, gbw.contiguous(), gsw, gsc


def _act_derivative(act: str, x):
    if act == "silu":
        s = torch.sigmoid(x)
        return s * (1 + x * (1 - s))
    if act == "gelu":  # Φ(x) + x·φ(x)
        return 0.5 * (1 + torch.erf(x * 0.5 ** 0.5)) + x * torch.exp(-0.5 * x * x) * (2 * math.pi) ** -0.5
    return torch.ones_like(x)


def _unpack(gw, sw, sc, g: Geometry, dtype):
    """The gradient of spline_weight·scaler split into spline_weight's and the scaler's."""
    if sc is None:
        return gw.to(dtype).contiguous(), sw.new_zeros(0)
    if gw.numel() == 0:
        return torch.zeros_like(sw), torch.zeros_like(sc)
    gs = gw.view(g.o, sc.shape[1], g.nb, -1)
    gsc = (gs * sw.view(gs.shape).to(gs.dtype)).sum(2)
    gsw = gs * sc.reshape(g.o, sc.shape[1], 1, -1).to(gs.dtype)
    return gsw.to(dtype).contiguous().view(sw.shape), gsc.to(dtype).contiguous().view(sc.shape)
