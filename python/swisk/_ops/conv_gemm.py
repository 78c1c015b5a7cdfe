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
from .kan_gemm import _key
from .run import hold, recording, take

_CONV = (F.conv1d, F.conv2d, F.conv3d)
_LOW = (torch.float16, torch.bfloat16)
# Tiles take a share of workspace_bytes. CPU: an eighth, at b32 32->32 28x28 as fast as a quarter, and the
# peak then 1/8 to 1/12 of the formulation's (bench, 1 and 2 threads). GPUs: a half, so fewer tiles and
# fewer host-side ops per step: the H200's kan_conv2d step was host-bound (4.6 ms of wall time for 0.95 ms
# of kernels, 2026-11-28). Unmeasured; the bench's GPU rows at other workspaces compare it.
TILE_SHARE = {"cpu": 8}
_GPU_SHARE = 2
# Whether the base branch may ride in the tiles (_Source.merged), per device type (default: yes). GPUs: one
# cuDNN call instead of two each way (~64 us of host time forward, ~120 backward on the H200, whose
# kan_conv step is host-bound). CPU: no: b32 C->32 28x28, merged against separate fwd+bwd, 1 thread
# C=8 / 16 / 32 / 64: 78.7 / 156.1 / 300.1 / 588.8 ms against 74.5 / 155.7 / 315.3 / 562.0; 2 threads
# C=16 / 32: 90.7 / 176.9 against 95.7 / 153.5 (one pixel per row leaves few channels' lanes empty).
MERGE = {"cpu": False}


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
        """Whether the convolutions can pad (zeros) themselves: whole images per tile, the same padding on
        both sides of every dim."""
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
    """One call's route and x as its tiles read it. native: the convolutions zero-pad (whole images, the
    same padding on both sides), else x is padded with -inf (bases 0). merged: the base branch rides in
    the tiles, each pixel's row [silu(x) | bases] (C + C·n_basis channels, kan_linear's A operand) against
    [base_weight | spline_weight·scaler]: one convolution instead of two, and the contraction returns the
    whole dx. It needs silu, one group, native padding and a pixel per row (m = 1)."""

    def __init__(self, x, grid, bw, g: Geometry, act: str, tiles):
        self.g, self.tiles, self.native, self.grid, self.grids = g, tiles, g.native(tiles), grid, {1: grid}
        xr = x.reshape(g.n, g.c, *g.spatial)
        self.pixels = (xr if self.native else F.pad(xr, torch_pads(g.padding), value=float("-inf"))).movedim(1, -1)
        self.conv_padding = g.padding[0::2] if self.native else [0] * g.d
        self.merged = (MERGE.get(x.device.type, True) and self.native and bw is not None and act == "silu"
                       and g.groups == 1)
        self.channels = g.c * (g.nb + self.merged)  # of E

    def rows(self, tile):
        """Input rows (first spatial dim, of pixels) that a tile reads: all of them for whole images."""
        return (0, self.pixels.shape[1]) if self.native else self.g.rows_in(tile[2], tile[3])

    def pixels_per_row(self, q: int) -> int:
        """m: the largest divisor of q with m·C <= 64 (vector lanes on the CPU), 1 when merged."""
        c = max(self.g.c, 1)
        for m in range(1 if self.merged else max(1, 64 // c), 0, -1):
            if q % m == 0:
                return m
        return 1

    def grid_for(self, m: int):
        if m not in self.grids:
            self.grids[m] = torch.cat([self.grid] * m)  # one op (repeat costs several)
        return self.grids[m]

    def weight(self, bw, sw, sc):
        """The convolution's weight: spline_weight·scaler, with base_weight's channels first when merged."""
        w = scaled_spline_weight(sw, sc)
        return torch.cat([bw, w], 1) if self.merged else w

    def buffers(self, dtype, device):
        line = math.prod(self.pixels.shape[2:-1])  # pixels per input row
        q = max((t[1] - t[0]) * (self.rows(t)[1] - self.rows(t)[0]) * line for t in self.tiles)
        # a contiguous x (channels-last, natively padded) is read in place by every tile: no copy buffer
        copy = None if self.pixels.is_contiguous() else torch.empty(q * self.g.c, dtype=dtype, device=device)
        return {"x": copy, "e": torch.empty(q * self.channels, dtype=dtype, device=device)}


class _Tile:
    """One tile: its input pixels (rows of C channels) and E as the vendor's convolution takes it,
    (n, channels, R, *rest) with channels-last strides. The expansion kernels see m consecutive pixels as
    one row of m·C features (same memory), so few channels still fill the vector lanes. The pixels are
    read in place when contiguous (channels-last x, natively padded)."""

    def __init__(self, source: _Source, tile, k, expand, bufs):
        n0, n1 = tile[:2]
        c = source.g.c
        self.r0, r1 = source.rows(tile)
        self.src = source.pixels[n0:n1, self.r0:r1]                # (n, R, *rest, C), a view
        q = self.src.numel() // c
        self.m = source.pixels_per_row(q)
        self.grid, self.k, self.base = source.grid_for(self.m), k, source.merged
        if self.src.is_contiguous():
            xb = self.src
        else:
            xb = bufs["x"][:q * c].view(self.src.shape)
            xb.copy_(self.src)
        self.x = xb.view(q // self.m, self.m * c)
        e = bufs["e"][:q * source.channels].view(q // self.m, -1)
        expand(self.x, self.grid, k, 0, self.base, e)
        self.e = e.view(*self.src.shape[:-1], source.channels).movedim(-1, 1)

    def contract(self, contract, de, dx=None):
        """dx (q, C) of the tile's pixels from dE (n, channels, R, *rest), into dx when given."""
        de = de.movedim(1, -1).contiguous().view(self.x.shape[0], -1)
        dx = torch.empty_like(self.x) if dx is None else dx.view(self.x.shape)
        contract(self.x, self.grid, de, self.k, 1, self.base, dx)
        return dx.view(self.src.shape)


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
    src = _Source(x, grid, bw, g, act, g.tiles(x.element_size(), 1))
    y = None
    if bw is not None and not src.merged:  # the base branch is the sum's first term: the tiles add theirs
        y = _as_output(conv(_base_input(x, g, act, src.native), bw, None, stride, src.conv_padding, dilation,
                            groups), x, g)
    w = src.weight(bw, sw, sc)
    if recording() and x.requires_grad:  # the backward's dE reuses it
        hold(sw, "conv_weight", (_key(bw), _key(sw), _key(sc), src.merged), w)
    bufs = src.buffers(x.dtype, x.device)
    for tile in src.tiles:
        t = _Tile(src, tile, k, expand, bufs)
        ys = conv(t.e, w, None, stride, src.conv_padding, dilation, groups)
        if y is None and len(src.tiles) == 1:
            y = _as_output(ys, x, g)
            continue
        if y is None:
            y = _empty_like_output(x, g, x.dtype)
        part = y[tile[0]:tile[1], :, tile[2]:tile[3]]
        if bw is None or src.merged:
            part.copy_(ys)
        else:
            part.add_(ys)
    return y.view(*g.lead, *y.shape[1:])


def _base_input(x, g: Geometry, act: str, native: bool):
    """act(x) as (N, C, *S), zero-padded unless the convolution pads."""
    xa = ACTIVATIONS[act](x.reshape(g.n, g.c, *g.spatial))
    return xa if native else pad(xa, g, 0.0)


def backward(expand, contract, x, grid, bw, sw, sc, gy, k, stride, padding, dilation, groups, act, need_x=True,
             need_weights=True):
    """(grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler); absent weights and unneeded
    gradients get (0,), and nothing of those is computed (without need_x: e.g. a network's first layer)."""
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    acc = torch.float32 if x.dtype in _LOW else x.dtype
    gy = gy.reshape(g.n, g.o, *g.out)
    xr = x.reshape(g.n, g.c, *g.spatial)
    mask = [need_x, need_weights, False]
    dx = gw = gbw = None
    if gy.numel() and g.c and (need_x or need_weights):
        src = _Source(x, grid, bw, g, act, g.tiles(x.element_size(), 2))
        crop = tuple(slice(g.padding[2 * i], g.padding[2 * i] + s) for i, s in enumerate(g.spatial))
        if bw is not None and not src.merged:  # the base branch first: its dx is where the tiles' dx add in
            gap, gb, _ = torch.ops.aten.convolution_backward(
                gy, _base_input(x, g, act, src.native), bw, None, list(stride), src.conv_padding, list(dilation),
                False, [0] * g.d, groups, mask)
            if need_weights:
                gbw = gb
            if need_x:
                dx = _act_backward(act, gap if src.native else gap[(slice(None), slice(None), *crop)], xr)
        w = take(sw, "conv_weight", (_key(bw), _key(sw), _key(sc), src.merged))  # the forward's, if unchanged
        if w is None:
            w = src.weight(bw, sw, sc)
        bufs = src.buffers(x.dtype, x.device)
        # dx of the pixels (channels-last): written once per pixel by whole-image tiles, else summed over tiles
        dxcl = (torch.empty if src.native else torch.zeros)(src.pixels.shape, dtype=x.dtype, device=x.device) \
            if need_x else None
        for tile in src.tiles:
            t = _Tile(src, tile, k, expand, bufs)
            de, dw, _ = torch.ops.aten.convolution_backward(
                gy[tile[0]:tile[1], :, tile[2]:tile[3]], t.e, w, None, list(stride), src.conv_padding,
                list(dilation), False, [0] * g.d, groups, mask)
            if need_weights:
                gw = dw.to(acc) if gw is None else gw.add_(dw)
            if need_x:
                rows = dxcl[tile[0]:tile[1], t.r0:t.r0 + t.src.shape[1]]
                if src.native:
                    t.contract(contract, de, rows)
                else:
                    rows += t.contract(contract, de)
        if need_x:
            spline_dx = (dxcl if src.native else dxcl[(slice(None), *crop)]).movedim(-1, 1)
            dx = spline_dx if dx is None else dx.add_(spline_dx)
        if need_weights and src.merged:  # [base_weight | spline] channels
            gbw, gw = gw[:, :g.c].to(x.dtype), gw[:, g.c:].contiguous()
    if not need_x:
        dx = x.new_zeros(0)
    else:
        dx = (torch.zeros_like(xr) if dx is None else dx).reshape(x.shape).contiguous()
    if not need_weights:
        return dx, x.new_zeros(0), x.new_zeros(0), x.new_zeros(0)
    if gbw is None:  # no base weight (0,), or nothing to sum (zeros)
        gbw = x.new_zeros(0) if bw is None else torch.zeros_like(bw)
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
