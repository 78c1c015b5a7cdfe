"""kan_conv on the GEMM route. Per tile of output rows, swisk's kan_expand writes the bases of the
padded input pixels the tile reads, E (pixels × C·n_basis; padding is -inf, whose bases are 0), once
per pixel. Stride 1 (unless the call is tiny): E is never unfolded; each kernel offset is E shifted by
a fixed number of rows (outputs computed at every padded position, the few invalid ones dropped), one
GEMM per offset into the output. Otherwise E is unfolded into A (pixels × C·K·n_basis), one GEMM. The base branch is
torch's convolution of act(x). Backward regenerates E; dE comes from the same shifted GEMMs (or the
fold of dA) and one kan_contract per input pixel gives dx. Neither the (N, C·n_basis, *S) basis
tensor nor a whole im2col is ever formed."""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from .. import config
from ..reference.conv import ACTIVATIONS, torch_pads
from .kan_gemm import _accumulate

_CONV = (F.conv1d, F.conv2d, F.conv3d)
_LOW = (torch.float16, torch.bfloat16)
SHIFTED_MIN = 1 << 18  # elements of the whole A below which one unfolded GEMM beats K shifted ones
TILE_SHARE = 4         # tiles take a quarter of workspace_bytes: the GEMMs keep thousands of rows


class Geometry:
    """Sizes of one call: x (..., C, *S) viewed as (N, C, *S), kernel K, groups G, output (N, O, *S_out)."""

    def __init__(self, x, sw, k, stride, padding, dilation, groups):
        d = sw.dim() - 2
        self.d, self.stride, self.padding, self.dilation, self.groups = d, stride, padding, dilation, groups
        self.c, self.spatial, self.lead = x.shape[-d - 1], tuple(x.shape[-d:]), tuple(x.shape[:-d - 1])
        self.n = math.prod(self.lead)
        self.o, self.kernel = sw.shape[0], tuple(sw.shape[2:])
        self.kk = math.prod(self.kernel)
        self.cg, self.og = self.c // groups, self.o // groups
        self.nb = sw.shape[1] // self.cg
        self.padded = tuple(s + padding[2 * i] + padding[2 * i + 1] for i, s in enumerate(self.spatial))
        self.out = tuple((p - dilation[i] * (kd - 1) - 1) // stride[i] + 1
                         for i, (p, kd) in enumerate(zip(self.padded, self.kernel)))
        self.pix = math.prod(self.out)
        self.line = math.prod(self.padded[1:])            # padded pixels per row of the first spatial dim
        # stride 1 and large enough that K GEMM calls cost less than unfolding A (one GEMM)
        self.shifted = all(s == 1 for s in stride) and self.n * self.pix * self.kk * self.c * self.nb >= SHIFTED_MIN
        # row offset of each kernel offset in E (stride 1): sum over dims of offset·dilation·row stride
        steps = [math.prod(self.padded[i + 1:]) for i in range(d)]
        self.shifts = [sum(o * dilation[i] * steps[i] for i, o in enumerate(offs))
                       for offs in itertools.product(*(range(kd) for kd in self.kernel))]

    def rows_in(self, o0, o1):
        """Padded input rows (first spatial dim) that output rows o0..o1 read."""
        return o0 * self.stride[0], min(self.padded[0], (o1 - 1) * self.stride[0] + self.dilation[0] * (
            self.kernel[0] - 1) + 1)

    def tiles(self, elsize: int, buffers: int):
        """(n0, n1, o0, o1): images n0..n1, and rows o0..o1 of the first output dim when one image does
        not fit the workspace (each tile's outputs are contiguous in (N, *S_out) order)."""
        width = self.c * self.nb * (1 if self.shifted else 1 + self.kk)
        per_out = max(1, (width + self.c + self.o) * elsize * buffers * max(1, math.prod(self.stride)))
        rows = max(1, config.get("workspace_bytes") // TILE_SHARE // per_out)
        if rows >= self.pix:
            per = max(1, rows // max(self.pix, 1))
            return [(n0, min(self.n, n0 + per), 0, self.out[0]) for n0 in range(0, self.n, per)]
        per = max(1, rows // (self.pix // self.out[0]))
        return [(n, n + 1, o0, min(self.out[0], o0 + per)) for n in range(self.n) for o0 in range(0, self.out[0], per)]


def pack_spline(sw, sc, g: Geometry):
    """Scaled spline weights as the GEMMs take them. Stride 1: (K, G, Cg·n_basis, O/G), one matrix per
    kernel offset and group; else (G, O/G, Cg·K·n_basis) with columns in A's order (c, offset, j)."""
    w = sw if sc is None else sw.view(g.o, g.cg, g.nb, g.kk) * sc.reshape(g.o, g.cg, 1, g.kk)
    w = w.reshape(g.groups, g.og, g.cg, g.nb, g.kk)
    if g.shifted:
        return w.permute(4, 0, 2, 3, 1).reshape(g.kk, g.groups, g.cg * g.nb, g.og).contiguous()
    return w.transpose(3, 4).reshape(g.groups, g.og, g.cg * g.kk * g.nb).contiguous()


def pad(x, g: Geometry, value: float):
    return F.pad(x.reshape(g.n, g.c, *g.spatial), torch_pads(g.padding), value=value)


def channels_last(x, d: int) -> bool:
    fmt = {2: torch.channels_last, 3: torch.channels_last_3d}.get(d)
    return fmt is not None and x.dim() == d + 2 and not x.is_contiguous() and x.is_contiguous(memory_format=fmt)


class _Tile:
    """One tile's input pixels (rows of channels, padded layout) and their bases E, with a zero tail of
    max(shifts) rows so that every shifted window stays inside the buffer."""

    def __init__(self, xcl, tile, g: Geometry, grid, k, expand, bufs):
        n0, n1, o0, o1 = tile
        self.tile, self.g = tile, g
        self.r0, r1 = g.rows_in(o0, o1)
        self.src = xcl[n0:n1, self.r0:r1]                       # (n, R, *rest, C), a view
        self.q = self.src.numel() // g.c                        # input pixels of the tile
        tail = g.shifts[-1] if g.shifted else 0
        xb = bufs["x"][:self.q * g.c]
        xb.view(self.src.shape).copy_(self.src)
        self.x = xb.view(self.q, g.c)
        e = bufs["e"][:(self.q + tail) * g.c * g.nb].view(self.q + tail, g.c * g.nb)
        e[self.q:].zero_()
        expand(self.x, grid, k, 0, False, e[:self.q])
        self.e = e
        self.n_out = (n1 - n0) * (o1 - o0) * (g.pix // g.out[0])

    def shape(self):
        return self.src.shape[:-1]                              # (n, R, *rest)

    def valid(self, full):
        """The tile's outputs (rows of full, computed at every padded position): a strided view."""
        g, (n0, n1, o0, o1) = self.g, self.tile
        v = full[:self.q].view(*self.shape(), full.shape[-1])
        return v[(slice(None), slice(0, o1 - o0), *(slice(0, s) for s in g.out[1:]))]

    def unfolded(self, abuf):
        """A (outputs × C·K·n_basis) copied from E's strided windows (strides other than 1)."""
        g, (n0, n1, o0, o1) = self.g, self.tile
        e = self.e[:self.q].view(*self.shape(), g.c, g.nb)
        st = e.stride()
        size = (n1 - n0, o1 - o0, *g.out[1:], g.c, *g.kernel, g.nb)
        strides = (st[0], *(st[1 + i] * g.stride[i] for i in range(g.d)), st[-2],
                   *(st[1 + i] * g.dilation[i] for i in range(g.d)), 1)
        a = abuf[:self.n_out * g.c * g.kk * g.nb]
        a.view(size).copy_(e.as_strided(size, strides, e.storage_offset()))
        return a.view(self.n_out, -1)

    def fold(self, da, de):
        """dE (+)= the fold of dA onto the pixels each window read (one strided add per kernel offset)."""
        g, (n0, n1, o0, o1) = self.g, self.tile
        dv = da.view(n1 - n0, o1 - o0, *g.out[1:], g.c, *g.kernel, g.nb)
        dev = de.view(*self.shape(), g.c, g.nb)
        counts = (o1 - o0, *g.out[1:])
        for offs in itertools.product(*(range(kd) for kd in g.kernel)):
            index = [slice(None)]
            for i, (o, c) in enumerate(zip(offs, counts)):
                index.append(slice(o * g.dilation[i], o * g.dilation[i] + (c - 1) * g.stride[i] + 1, g.stride[i]))
            dev[tuple(index)] += dv[(slice(None),) * (2 + g.d) + (*offs, slice(None))]


def _buffers(g: Geometry, tiles, dtype, device, grads: bool):
    q = max((t[1] - t[0]) * (g.rows_in(t[2], t[3])[1] - g.rows_in(t[2], t[3])[0]) * g.line for t in tiles)
    n_out = max((t[1] - t[0]) * (t[3] - t[2]) * (g.pix // g.out[0]) for t in tiles)
    tail = g.shifts[-1] if g.shifted else 0
    e = lambda n: torch.empty(n, dtype=dtype, device=device)  # noqa: E731
    bufs = {"x": e(q * g.c), "e": e((q + tail) * g.c * g.nb)}
    if g.shifted:
        bufs["y"] = e((q + tail) * g.o)
    else:
        bufs["a"] = e(n_out * g.c * g.kk * g.nb)
    if grads:
        bufs["de"] = e((q + tail) * g.c * g.nb)
        if not g.shifted:
            bufs["da"] = e(n_out * g.c * g.kk * g.nb)
    return bufs


def _cols(t, g: Geometry, group: int, width: int):
    return t[:, group * width:(group + 1) * width]


def forward(expand, x, grid, bw, sw, sc, k, stride, padding, dilation, groups, act):
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    y = torch.empty(g.n, *g.out, g.o, dtype=x.dtype, device=x.device)
    if y.numel():
        if g.c * g.nb == 0:
            y.zero_()
        else:
            w = pack_spline(sw, sc, g)
            xcl = pad(x, g, float("-inf")).movedim(1, -1)
            tiles = g.tiles(x.element_size(), 1)
            bufs = _buffers(g, tiles, x.dtype, x.device, False)
            y2 = y.view(-1, g.o)
            r = 0
            for tile in tiles:
                t = _Tile(xcl, tile, g, grid, k, expand, bufs)
                out = y2[r:r + t.n_out]
                if g.shifted:
                    full = bufs["y"][:t.q * g.o].view(t.q, g.o)
                    _shifted_forward(t, w, full, g)
                    out.view(t.valid(full).shape).copy_(t.valid(full))
                else:
                    a = t.unfolded(bufs["a"])
                    _grouped_mm(a, w, out, g)
                r += t.n_out
        if bw is not None:
            base = _CONV[g.d - 1](pad(ACTIVATIONS[act](x), g, 0.0), bw, None, stride, 0, dilation, groups)
            y += base.movedim(1, -1)
    y = y.view(*g.lead, *g.out, g.o).movedim(-1, -g.d - 1)
    return y if channels_last(x, g.d) else y.contiguous()


def _shifted_forward(t: _Tile, w, full, g: Geometry):
    """full (q, O) = Σ_offsets E[shift:shift+q] @ W[offset], per group."""
    wg = g.cg * g.nb
    for i, s in enumerate(g.shifts):
        e = t.e[s:s + t.q]
        for grp in range(g.groups):
            dst = _cols(full, g, grp, g.og)
            src = _cols(e, g, grp, wg)
            if i == 0 and g.groups == 1:
                torch.mm(src, w[i, grp], out=dst)
            elif i == 0:
                dst.copy_(src @ w[i, grp])
            else:
                dst.addmm_(src, w[i, grp])


def _grouped_mm(a, w, out, g: Geometry):
    """out (P, O) = A (P, G·Wg) times each group's weights (G, O/G, Wg)ᵀ."""
    if g.groups == 1:
        torch.mm(a, w[0].t(), out=out)
    else:
        out.view(-1, g.groups, g.og).copy_(torch.bmm(a.view(-1, g.groups, w.shape[2]).transpose(0, 1),
                                                     w.transpose(1, 2)).transpose(0, 1))


def backward(expand, contract, x, grid, bw, sw, sc, gy, k, stride, padding, dilation, groups, act):
    """(grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler); absent weights get (0,)."""
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    acc = torch.float32 if x.dtype in _LOW else x.dtype
    gy_rows = gy.reshape(g.n, g.o, *g.out).movedim(1, -1)          # (N, *S_out, O), a view
    xcl = pad(x, g, float("-inf")).movedim(1, -1)
    dxcl = torch.zeros(xcl.shape, dtype=x.dtype, device=x.device)  # (N, *S_padded, C)
    gw = torch.zeros(pack_spline(sw, sc, g).shape, dtype=acc, device=x.device) if g.c * g.nb else None
    if gy.numel() and g.c * g.nb:
        w = pack_spline(sw, sc, g)
        tiles = g.tiles(x.element_size(), 2)
        bufs = _buffers(g, tiles, x.dtype, x.device, True)
        for tile in tiles:
            t = _Tile(xcl, tile, g, grid, k, expand, bufs)
            gt = gy_rows[tile[0]:tile[1], tile[2]:tile[3]]
            de = bufs["de"][:t.e.numel()].view(t.e.shape)
            if g.shifted:
                full = bufs["y"][:t.q * g.o].view(t.q, g.o).zero_()
                t.valid(full).copy_(gt)
                _shifted_backward(t, w, full, gw, de, g)
            else:
                a = t.unfolded(bufs["a"])
                g2 = gt.reshape(t.n_out, g.o)
                da = bufs["da"][:a.numel()].view(a.shape)
                _weight_grad(gw, g2, a, g)
                if g.groups == 1:
                    torch.mm(g2, w[0], out=da)
                else:
                    da.view(-1, g.groups, w.shape[2]).copy_(
                        torch.bmm(g2.view(-1, g.groups, g.og).transpose(0, 1), w).transpose(0, 1))
                de[:t.q].zero_()
                t.fold(da, de[:t.q])
            dx = torch.empty_like(t.x)
            contract(t.x, grid, de[:t.q], k, 1, False, dx)
            dxcl[tile[0]:tile[1], t.r0:t.r0 + t.shape()[1]] += dx.view(t.src.shape)
    crop = tuple(slice(g.padding[2 * i], g.padding[2 * i] + s) for i, s in enumerate(g.spatial))
    dx = dxcl[(slice(None), *crop)].movedim(-1, 1)
    gbw = x.new_zeros(0)
    if bw is not None:
        xr = x.reshape(g.n, g.c, *g.spatial)
        gap, gbw, _ = torch.ops.aten.convolution_backward(
            gy.reshape(g.n, g.o, *g.out), pad(ACTIVATIONS[act](xr), g, 0.0), bw, None, list(stride), [0] * g.d,
            list(dilation), False, [0] * g.d, groups, [True, True, False])
        dx = dx + gap[(slice(None), slice(None), *crop)] * _act_derivative(act, xr)
    gsw, gsc = _unpack(gw, sw, sc, g, x.dtype)
    return dx.reshape(x.shape).contiguous(), gbw.contiguous(), gsw, gsc


def _act_derivative(act: str, x):
    if act == "silu":
        s = torch.sigmoid(x)
        return s * (1 + x * (1 - s))
    if act == "gelu":  # Φ(x) + x·φ(x)
        return 0.5 * (1 + torch.erf(x * 0.5 ** 0.5)) + x * torch.exp(-0.5 * x * x) * (2 * math.pi) ** -0.5
    return torch.ones_like(x)


def _shifted_backward(t: _Tile, w, full, gw, de, g: Geometry):
    """dW[offset] += E[shift:shift+q]ᵀ @ gy; dE[shift:shift+q] += gy @ W[offset]ᵀ (per group)."""
    wg = g.cg * g.nb
    de.zero_()
    for i, s in enumerate(g.shifts):
        e, d = t.e[s:s + t.q], de[s:s + t.q]
        for grp in range(g.groups):
            gg = _cols(full, g, grp, g.og)
            _accumulate(gw[i, grp], _cols(e, g, grp, wg).t(), gg, False)
            _cols(d, g, grp, wg).addmm_(gg, w[i, grp].t())


def _weight_grad(gw, g2, a, g: Geometry):
    if g.groups == 1:
        _accumulate(gw[0], g2.t(), a, False)
        return
    gw += torch.bmm(g2.view(-1, g.groups, g.og).permute(1, 2, 0), a.view(-1, g.groups, gw.shape[2]).transpose(0, 1))


def _unpack(gw, sw, sc, g: Geometry, dtype):
    """The packed weight gradient back in spline_weight's layout, and the scaler's."""
    if gw is None:
        return torch.zeros_like(sw), (sw.new_zeros(0) if sc is None else torch.zeros_like(sc))
    if g.shifted:   # (K, G, Cg·n_basis, O/G) -> (O, Cg, n_basis, K)
        gs = gw.view(g.kk, g.groups, g.cg, g.nb, g.og).permute(1, 4, 2, 3, 0).reshape(g.o, g.cg, g.nb, g.kk)
    else:           # (G, O/G, Cg·K·n_basis) -> (O, Cg, n_basis, K)
        gs = gw.view(g.o, g.cg, g.kk, g.nb).transpose(2, 3)
    if sc is None:
        return gs.to(dtype).contiguous().view(sw.shape), sw.new_zeros(0)
    gsc = (gs * sw.view(g.o, g.cg, g.nb, g.kk).to(gs.dtype)).sum(2)
    gsw = gs * sc.reshape(g.o, g.cg, 1, g.kk).to(gs.dtype)
    return gsw.to(dtype).contiguous().view(sw.shape), gsc.to(dtype).contiguous().view(sc.shape)
