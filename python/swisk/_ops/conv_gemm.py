"""kan_conv on the GEMM route: for a tile of output pixels, the patches of x (zero padding written as
-inf, whose bases are 0) are expanded by swisk's kan_expand into A (pixels × C·K·n_basis), which
torch's GEMM multiplies by the packed spline weights; the base branch is torch's convolution of
act(x). Backward regenerates the tiles: dW from Aᵀ·gy, dx from kan_contract of gy·W folded back onto
x. Neither the (N, C·n_basis, *S) basis tensor nor a whole im2col is ever formed."""
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
        self.out = tuple((s + padding[2 * i] + padding[2 * i + 1] - dilation[i] * (kd - 1) - 1) // stride[i] + 1
                         for i, (s, kd) in enumerate(zip(self.spatial, self.kernel)))
        self.pix = math.prod(self.out)
        self.cols = self.c * self.kk                    # patch columns (c, kernel offset)
        self.width = self.cols * self.nb                # A columns (c, kernel offset, j)

    def tiles(self, elsize: int, buffers: int):
        """(n0, n1, o0, o1): images n0..n1, and rows o0..o1 of the first output dim when one image
        does not fit the workspace; each tile's rows are contiguous in (N, *S_out) order."""
        per_row = max(1, (self.width + self.cols) * elsize * buffers)
        rows = max(1, config.get("workspace_bytes") // per_row)
        if rows >= self.pix:
            per = max(1, rows // max(self.pix, 1))
            return [(n0, min(self.n, n0 + per), 0, self.out[0]) for n0 in range(0, self.n, per)]
        line = self.pix // self.out[0]
        per = max(1, rows // line)
        return [(n, n + 1, o0, min(self.out[0], o0 + per)) for n in range(self.n) for o0 in range(0, self.out[0], per)]

    def patches(self, xp):
        """The strided view (N, *S_out, C, *K) of the padded x: no copy."""
        st = xp.stride()
        size = (self.n, *self.out, self.c, *self.kernel)
        strides = (st[0], *(st[2 + i] * self.stride[i] for i in range(self.d)), st[1],
                   *(st[2 + i] * self.dilation[i] for i in range(self.d)))
        return xp.as_strided(size, strides, xp.storage_offset())


def pack_spline(sw, sc, g: Geometry):
    """(G, O/G, Cg·K·n_basis): the scaled spline weights with columns in A's order (c, kernel offset, j)."""
    w = sw if sc is None else sw.view(g.o, g.cg, g.nb, g.kk) * sc.reshape(g.o, g.cg, 1, g.kk)
    return w.reshape(g.o, g.cg, g.nb, g.kk).transpose(2, 3).reshape(g.groups, g.og, g.cg * g.kk * g.nb).contiguous()


def _pad(x, g: Geometry, value: float):
    return F.pad(x.reshape(g.n, g.c, *g.spatial), torch_pads(g.padding), value=value)


def _tile_a(view, tile, g: Geometry, grid_rep, k, expand, pbuf, abuf):
    """Copies the tile's patches into pbuf, expands them into abuf: (patches (P, cols), A (P, width))."""
    n0, n1, o0, o1 = tile
    src = view[n0:n1, o0:o1]
    rows = src.shape[0] * math.prod(src.shape[1:1 + g.d])
    p = pbuf[:rows * g.cols]
    p.view(src.shape).copy_(src)
    p = p.view(rows, g.cols)
    a = abuf[:rows * g.width].view(rows, g.width)
    expand(p, grid_rep, k, 0, False, a)
    return p, a


def _grouped_mm(a, w, out, g: Geometry):
    """out (P, O) = A (P, G·Wg) times each group's weights (G, O/G, Wg)ᵀ."""
    if g.groups == 1:
        torch.mm(a, w[0].t(), out=out)
    else:
        out.view(-1, g.groups, g.og).copy_(torch.bmm(a.view(-1, g.groups, w.shape[2]).transpose(0, 1),
                                                     w.transpose(1, 2)).transpose(0, 1))


def _layout(y, x, g: Geometry):
    """(N, *S_out, O) -> (..., O, *S_out): channels_last strides when x is channels_last, else contiguous."""
    y = y.view(*g.lead, *g.out, g.o).movedim(-1, -g.d - 1)
    return y if channels_last(x, g.d) else y.contiguous()


def channels_last(x, d: int) -> bool:
    fmt = {2: torch.channels_last, 3: torch.channels_last_3d}.get(d)
    return fmt is not None and x.dim() == d + 2 and not x.is_contiguous() and x.is_contiguous(memory_format=fmt)


def forward(expand, x, grid, bw, sw, sc, k, stride, padding, dilation, groups, act):
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    y = torch.empty(g.n, *g.out, g.o, dtype=x.dtype, device=x.device)
    y2 = y.view(g.n * g.pix, g.o)
    if y.numel():
        if g.width == 0:
            y.zero_()
        else:
            w = pack_spline(sw, sc, g)
            view = g.patches(_pad(x, g, float("-inf")))
            grid_rep = grid.repeat_interleave(g.kk, 0)
            tiles = g.tiles(x.element_size(), 1)
            rows = max((t[1] - t[0]) * (t[3] - t[2]) * (g.pix // g.out[0]) for t in tiles)
            pbuf = torch.empty(rows * g.cols, dtype=x.dtype, device=x.device)
            abuf = torch.empty(rows * g.width, dtype=x.dtype, device=x.device)
            r0 = 0
            for tile in tiles:
                _, a = _tile_a(view, tile, g, grid_rep, k, expand, pbuf, abuf)
                _grouped_mm(a, w, y2[r0:r0 + a.shape[0]], g)
                r0 += a.shape[0]
        if bw is not None:
            base = _CONV[g.d - 1](_pad(ACTIVATIONS[act](x), g, 0.0), bw, None, stride, 0, dilation, groups)
            y += base.movedim(1, -1)
    return _layout(y, x, g)


def backward(expand, contract, x, grid, bw, sw, sc, gy, k, stride, padding, dilation, groups, act):
    """(grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler); absent weights get (0,)."""
    g = Geometry(x, sw, k, stride, padding, dilation, groups)
    acc = torch.float32 if x.dtype in _LOW else x.dtype
    gy_rows = gy.reshape(g.n, g.o, *g.out).movedim(1, -1)          # (N, *S_out, O), a view
    xp = _pad(x, g, float("-inf"))
    dxp = torch.zeros(xp.shape, dtype=x.dtype, device=x.device)
    gsp = torch.zeros(g.groups, g.og, g.cg * g.kk * g.nb, dtype=acc, device=x.device)
    if gy.numel() and g.width:
        w = pack_spline(sw, sc, g)
        view = g.patches(xp)
        grid_rep = grid.repeat_interleave(g.kk, 0)
        tiles = g.tiles(x.element_size(), 2)
        rows = max((t[1] - t[0]) * (t[3] - t[2]) * (g.pix // g.out[0]) for t in tiles)
        pbuf, abuf = (torch.empty(rows * n, dtype=x.dtype, device=x.device) for n in (g.cols, g.width))
        dpbuf, dabuf = (torch.empty(rows * n, dtype=x.dtype, device=x.device) for n in (g.cols, g.width))
        for t, tile in enumerate(tiles):
            p, a = _tile_a(view, tile, g, grid_rep, k, expand, pbuf, abuf)
            gt = gy_rows[tile[0]:tile[1], tile[2]:tile[3]].reshape(p.shape[0], g.o)
            _weight_grad(gsp, gt, a, g, t == 0)
            da = dabuf[:a.numel()].view(a.shape)
            if g.groups == 1:
                torch.mm(gt, w[0], out=da)
            else:
                da.view(-1, g.groups, w.shape[2]).copy_(
                    torch.bmm(gt.view(-1, g.groups, g.og).transpose(0, 1), w).transpose(0, 1))
            dp = dpbuf[:p.numel()].view(p.shape)
            contract(p, grid_rep, da, k, 1, False, dp)
            _fold(dxp, dp, tile, g)
    dx = _crop(dxp, g)
    gbw = x.new_zeros(0)
    if bw is not None:
        with torch.enable_grad():
            xr = x.detach().reshape(g.n, g.c, *g.spatial).requires_grad_()
            ap = _pad(ACTIVATIONS[act](xr), g, 0.0)
        gap, gbw, _ = torch.ops.aten.convolution_backward(
            gy.reshape(g.n, g.o, *g.out), ap.detach(), bw, None, list(stride), [0] * g.d, list(dilation), False,
            [0] * g.d, groups, [True, True, False])
        (gxa,) = torch.autograd.grad(ap, xr, gap)
        dx += gxa
    gsw, gsc = _unpack(gsp, sw, sc, g, x.dtype)
    return dx.reshape(x.shape), gbw, gsw, gsc


def _weight_grad(gsp, gt, a, g: Geometry, first: bool):
    if g.groups == 1:
        _accumulate(gsp[0], gt.t(), a, first)
        return
    prod = torch.bmm(gt.view(-1, g.groups, g.og).permute(1, 2, 0), a.view(-1, g.groups, gsp.shape[2]).transpose(0, 1))
    gsp += prod


def _fold(dxp, dp, tile, g: Geometry):
    """Adds each kernel offset's patch gradients onto the padded x positions it read (the adjoint of
    the patch view; one strided slice per offset, so no two writes of an add overlap)."""
    n0, n1, o0, o1 = tile
    dpv = dp.view(n1 - n0, o1 - o0, *g.out[1:], g.c, *g.kernel)
    counts = (o1 - o0, *g.out[1:])
    for offs in itertools.product(*(range(kd) for kd in g.kernel)):
        src = dpv[(Ellipsis, *offs)].movedim(-1, 1)                # (n, C, *tile_out)
        index = [slice(n0, n1), slice(None)]
        for i, (o, c) in enumerate(zip(offs, counts)):
            start = o * g.dilation[i] + (o0 * g.stride[0] if i == 0 else 0)
            index.append(slice(start, start + (c - 1) * g.stride[i] + 1, g.stride[i]))
        dxp[tuple(index)] += src


def _crop(dxp, g: Geometry):
    index = [slice(None), slice(None)]
    index += [slice(g.padding[2 * i], g.padding[2 * i] + s) for i, s in enumerate(g.spatial)]
    return dxp[tuple(index)]


def _unpack(gsp, sw, sc, g: Geometry, dtype):
    """The packed gradient (G, O/G, Cg·K·n_basis) back in spline_weight's layout, and the scaler's."""
    gs = gsp.view(g.o, g.cg, g.kk, g.nb).transpose(2, 3)          # (O, Cg, n_basis, K)
    if sc is None:
        return gs.reshape(sw.shape).to(dtype), sw.new_zeros(0)
    gsc = (gs * sw.view(g.o, g.cg, g.nb, g.kk).to(gs.dtype)).sum(2).reshape(sc.shape)
    gsw = (gs * sc.reshape(g.o, g.cg, 1, g.kk).to(gs.dtype)).reshape(sw.shape)
    return gsw.to(dtype), gsc.to(dtype)
