"""kan_conv on the vendor's route. Per tile of images (or of output rows, when one image does not fit),
swisk's kan_expand writes the bases E of the input pixels the tile reads (pixels × C·n_basis,
channels-last) once per pixel; the vendor's convolution (oneDNN / cuDNN / MPS through torch, an implicit
GEMM) multiplies E by spline_weight·scaler, and the base branch is its convolution of act(x). Padding: the
convolution's own zero padding of E and act(x) where the tiles are whole images and the padding is
symmetric; otherwise x is padded with -inf, whose bases are 0. Backward regenerates E, takes dE and the
weight gradient from the vendor's convolution backward, and one kan_contract per input pixel turns dE into
dx. Neither the (N, C·n_basis, *S) basis tensor of the whole input nor an im2col is ever formed."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import config
from ..reference.conv import ACTIVATIONS, scaled_spline_weight, torch_pads

_CONV = (F.conv1d, F.conv2d, F.conv3d)
_LOW = (torch.float16, torch.bfloat16)
# Tiles take a share of workspace_bytes. CPU: an eighth, at b32 32->32 28x28 as fast as a quarter, and the
# peak then 1/8 to 1/12 of the formulation's (bench, 1 and 2 threads). GPUs: a half, the tile of the H200's
# 256 MiB-workspace row (4.77 ms fwd+bwd fp32 against 5.89 with 8 MiB tiles, 2026-11-28): there each
# tile's dozen ops cost host time, not the kernels.
TILE_SHARE = {"cpu": 8}
_GPU_SHARE = 2


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
        self.line = math.prod(self.padded[1:])  # padded pixels per row of the first spatial dim
        self.share = TILE_SHARE.get(x.device.type, _GPU_SHARE)
        self.symmetric = padding[0::2] == padding[1::2]

    def rows_in(self, o0, o1):
        """Padded input rows (first spatial dim) that output rows o0..o1 read."""
        return o0 * self.stride[0], (o1 - 1) * self.stride[0] + self.dilation[0] * (self.kernel[0] - 1) + 1

    def tiles(self, elsize: int, buffers: int):
        """(n0, n1, o0, o1): images n0..n1, and rows o0..o1 of the first output dim when one image does
        not fit (E of a tile, with dE in backward, within a share of the workspace)."""
        per_row = max(1, self.line * (self.c * self.nb + self.c) * elsize * buffers)  # one padded input row
        rows = max(1, config.get("workspace_bytes") // self.share // per_row)
        if rows >= self.padded[0]:
            per = max(1, rows // self.padded[0])
            return [(n0, min(self.n, n0 + per), 0, self.out[0]) for n0 in range(0, self.n, per)]
        span = self.dilation[0] * (self.kernel[0] - 1) + 1
        per = max(1, (rows - span) // self.stride[0] + 1)
        return [(n, n + 1, o0, min(self.out[0], o0 + per)) for n in range(self.n) for o0 in range(0, self.out[0], per)]

    def native(self, tiles) -> bool:
        """Whether the convolutions pad (zeros) themselves: whole images per tile, the same padding on both
        sides of every dim."""
        return self.symmetric and tiles[0][2:] == (0, self.out[0])


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


class _Source:
    """x as the tiles read it: (N, *S, C) pixels of C channels, padded with -inf unless the convolutions
    pad; the grid repeated for m pixels per row of the expansion kernels."""

    def __init__(self, x, grid, g: Geometry, native: bool):
        self.native, self.grid, self.grids = native, grid, {1: grid}
        xr = x.reshape(g.n, g.c, *g.spatial)
        self.pixels = (xr if native else F.pad(xr, torch_pads(g.padding), value=float("-inf"))).movedim(1, -1)
        self.conv_padding = g.padding[0::2] if native else [0] * g.d

    def rows(self, tile, g: Geometry):
        """Input rows (first spatial dim, of pixels) that a tile reads: all of them for whole images."""
        return (0, self.pixels.shape[1]) if self.native else g.rows_in(tile[2], tile[3])

    def grid_for(self, m: int):
        if m not in self.grids:
            self.grids[m] = torch.cat([self.grid] * m)  # one op (repeat costs several)
        return self.grids[m]


class _Tile:
    """One tile: its input pixels (rows of C channels) and their bases E as the vendor's convolution
    takes them, (n, C·n_basis, R, *rest) with channels-last strides. The expansion kernels see m
    consecutive pixels as one row of m·C features (same memory), so few channels still fill the vector
    lanes. The pixels are read in place when contiguous (channels-last x, natively padded)."""

    def __init__(self, source: _Source, tile, g: Geometry, k, expand, bufs):
        n0, n1, o0, o1 = tile
        self.r0, r1 = source.rows(tile, g)
        self.src = source.pixels[n0:n1, self.r0:r1]                # (n, R, *rest, C), a view
        q = self.src.numel() // g.c
        self.m = _pixels_per_row(q, g.c)
        self.grid = source.grid_for(self.m)
        if self.src.is_contiguous():
            xb = self.src
        else:
            xb = bufs["x"][:q * g.c].view(self.src.shape)
            xb.copy_(self.src)
        self.x = xb.view(q // self.m, self.m * g.c)
        e = bufs["e"][:q * g.c * g.nb].view(q // self.m, -1)
        self.k = k
        expand(self.x, self.grid, k, 0, False, e)
        self.e = e.view(*self.src.shape[:-1], g.c * g.nb).movedim(-1, 1)

    def contract(self, contract, de, dx=None):
        """dx (q, C) of the tile's pixels from dE (n, C·n_basis, R, *rest), into dx when given."""
        de = de.movedim(1, -1).contiguous().view(self.x.shape[0], -1)
        dx = torch.empty_like(self.x) if dx is None else dx.view(self.x.shape)
        contract(self.x, self.grid, de, self.k, 1, False, dx)
        return dx.view(self.src.shape)


def _pixels_per_row(q: int, c: int) -> int:
    """The largest divisor m of q with m·C <= 64 (at least 1)."""
    for m in range(max(1, 64 // max(c, 1)), 0, -1):
        if q % m == 0:
            return m
    return 1


def _buffers(g: Geometry, source: _Source, tiles, dtype, device):
    line = math.prod(source.pixels.shape[2:-1])  # pixels per input row
    q = max((t[1] - t[0]) * (source.rows(t, g)[1] - source.rows(t, g)[0]) * line for t in tiles)
    return {"x": torch.empty(q * g.c, dtype=dtype, device=device),
            "e": torch.empty(q * g.c * g.nb, dtype=dtype, device=device)}


def _as_output(y, x, g: Geometry):
    """y with the strides kan_conv promises (its fake kernel's): as it is, or copied once."""
    want = _empty_like_output(x, g, y.dtype)
    if y.stride() == want.stride():
        return y
    return want.copy_(y)


def forward(expand, x, grid, bw, sw, sc, k, stride, padding, dilation, groups, act):
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    conv = _CONV[g.d - 1]
    if g.n * g.o * math.prod(g.out) == 0:
        return _empty_like_output(x, g, x.dtype).view(*g.lead, g.o, *g.out)
    if g.c * g.nb == 0:
        return _empty_like_output(x, g, x.dtype).zero_().view(*g.lead, g.o, *g.out)
    tiles = g.tiles(x.element_size(), 1)
    native = g.native(tiles)
    y = None
    if bw is not None:  # the base branch's output is the sum's first term: the tiles add theirs to it
        xa = ACTIVATIONS[act](x.reshape(g.n, g.c, *g.spatial))
        y = conv(xa if native else pad(xa, g, 0.0), bw, None, stride, g.padding[0::2] if native else 0, dilation,
                 groups)
        y = _as_output(y, x, g)
    w = scaled_spline_weight(sw, sc)
    source = _Source(x, grid, g, native)
    bufs = _buffers(g, source, tiles, x.dtype, x.device)
    for tile in tiles:
        t = _Tile(source, tile, g, k, expand, bufs)
        ys = conv(t.e, w, None, stride, source.conv_padding, dilation, groups)
        if y is None and len(tiles) == 1:
            y = _as_output(ys, x, g)
        else:
            if y is None:
                y = _empty_like_output(x, g, x.dtype)
            part = y[tile[0]:tile[1], :, tile[2]:tile[3]]
            if bw is None:
                part.copy_(ys)
            else:
                part.add_(ys)
    return y.view(*g.lead, *y.shape[1:])


def backward(expand, contract, x, grid, bw, sw, sc, gy, k, stride, padding, dilation, groups, act, need_x=True,
             need_weights=True):
    """(grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler); absent weights and unneeded
    gradients get (0,), and nothing of those is computed (without need_x: e.g. a network's first layer)."""
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    acc = torch.float32 if x.dtype in _LOW else x.dtype
    gy = gy.reshape(g.n, g.o, *g.out)
    xr = x.reshape(g.n, g.c, *g.spatial)
    live = gy.numel() and g.c and (need_x or need_weights)
    tiles = g.tiles(x.element_size(), 2) if live else [(0, g.n, 0, g.out[0])]
    native = g.native(tiles)
    conv_padding = g.padding[0::2] if native else [0] * g.d
    mask = [need_x, need_weights, False]
    dx = gw = None
    gbw = torch.zeros_like(bw) if bw is not None and need_weights else x.new_zeros(0)
    if live and bw is not None:  # the base branch first: its dx is where the tiles' dx add in
        xa = ACTIVATIONS[act](xr)
        gap, gb, _ = torch.ops.aten.convolution_backward(
            gy, xa if native else pad(xa, g, 0.0), bw, None, list(stride), conv_padding, list(dilation), False,
            [0] * g.d, groups, mask)
        if need_weights:
            gbw = gb
        if need_x:
            crop = (slice(None), slice(None), *(slice(g.padding[2 * i], g.padding[2 * i] + s)
                                                for i, s in enumerate(g.spatial)))
            dx = _act_backward(act, gap if native else gap[crop], xr)
    if live:
        source = _Source(x, grid, g, native)
        w = scaled_spline_weight(sw, sc)
        bufs = _buffers(g, source, tiles, x.dtype, x.device)
        # dx of the pixels (channels-last): written once per pixel by whole-image tiles, else summed over tiles
        dxcl = None
        if need_x:
            dxcl = (torch.empty if native else torch.zeros)(source.pixels.shape, dtype=x.dtype, device=x.device)
        for tile in tiles:
            t = _Tile(source, tile, g, k, expand, bufs)
            de, dw, _ = torch.ops.aten.convolution_backward(
                gy[tile[0]:tile[1], :, tile[2]:tile[3]], t.e, w, None, list(stride), source.conv_padding,
                list(dilation), False, [0] * g.d, groups, mask)
            if need_weights:
                gw = dw.to(acc) if gw is None else gw.add_(dw)
            if need_x:
                rows = dxcl[tile[0]:tile[1], t.r0:t.r0 + t.src.shape[1]]
                if native:
                    t.contract(contract, de, rows)
                else:
                    rows += t.contract(contract, de)
        if need_x:
            crop = tuple(slice(g.padding[2 * i], g.padding[2 * i] + s) for i, s in enumerate(g.spatial))
            spline_dx = (dxcl if native else dxcl[(slice(None), *crop)]).movedim(-1, 1)
            dx = spline_dx if dx is None else dx.add_(spline_dx)
    if not need_x:
        dx = x.new_zeros(0)
    else:
        dx = (torch.zeros_like(xr) if dx is None else dx).reshape(x.shape).contiguous()
    if not need_weights:
        return dx, gbw, x.new_zeros(0), x.new_zeros(0)
    if gw is None:
        gw = torch.zeros(sw.shape, dtype=acc, device=x.device)
    gsw, gsc = _unpack(gw, sw, sc, g, x.dtype)
    return dx, gbw.contiguous(), gsw, gsc


def _act_backward(act: str, grad, x):
    """grad · act'(x), in one op (identity: grad itself, which the caller owns)."""
    if act == "silu":
        return torch.ops.aten.silu_backward(grad, x)
    if act == "gelu":
        return torch.ops.aten.gelu_backward(grad, x)
    return grad


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
