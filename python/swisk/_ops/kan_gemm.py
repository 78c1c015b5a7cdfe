"""kan_linear on the GEMM route (DESIGN.md, "GEMM-shaped work"): swisk's kernels write row tiles of
the A-operand [silu(x) | B(x)] into a bounded workspace, torch's GEMM (MKL/OpenBLAS, cuBLAS, MPS)
multiplies them by the packed weights [base_weight | spline_weight·spline_scaler], and in backward
the contraction kernel turns dA = gy·W into dx. A is regenerated in backward, never saved."""
from __future__ import annotations

import functools
import math
import threading
import weakref

import torch
import torch.utils.weak

from .. import config
from .run import hold, recording, take

_LOW = (torch.float16, torch.bfloat16)


def _rows_per_tile(rows: int, width: int, elsize: int, buffers: int) -> int:
    per_row = max(1, width * elsize * buffers)
    return max(1, min(rows, config.get("workspace_bytes") // per_row))


def _pack(bw, sw, sc, w=None):
    out_f, in_f, nb = sw.shape
    base = 0 if bw is None else in_f
    if w is None:
        w = torch.empty(out_f, base + in_f * nb, dtype=sw.dtype, device=sw.device)
    if bw is not None:
        w[:, :in_f].copy_(bw)
    spline = w[:, base:].view(out_f, in_f, nb)
    if sc is None:
        spline.copy_(sw)
    else:
        torch.mul(sw, sc.unsqueeze(-1), out=spline)
    return w


def _key(t):
    return None if t is None else (id(t), t.data_ptr(), t._version, t.dtype, t.device)


class _Spare:
    """A trainable spline_weight's W buffer on the CPU, lent to one forward at a time (threads sharing
    a layer pack elsewhere) and kept lent while that forward's backward holds it."""
    __slots__ = ("buffer", "packing", "holder")

    def __init__(self, buffer):
        self.buffer, self.packing, self.holder = buffer, False, None

    def lent(self) -> bool:
        holder = self.holder() if self.holder is not None else None
        return self.packing or (holder is not None and holder.holds(self.buffer))


_SPARES = torch.utils.weak.WeakIdKeyDictionary()  # spline_weight -> _Spare, beside the module
_SPARES_LOCK = threading.Lock()


def _borrow(bw, sw, sc):
    """On the CPU, trainable weights keep their last training step's W buffer (beside the module, not in
    it: never saved with it) and every forward packs into it: a fresh allocation of that size costs its
    page faults on every step. (Repacked each time: never a cache.) While another forward packs into it or
    a pending backward holds it, a forward packs into a fresh buffer (None): its weights may differ
    (another scaler or base weight beside the same spline_weight, values changed through .data)."""
    if sw.device.type != "cpu" or not any(t is not None and t.requires_grad for t in (bw, sw, sc)):
        return None
    shape = (sw.shape[0], (0 if bw is None else sw.shape[1]) + sw.shape[1] * sw.shape[2])
    with _SPARES_LOCK:
        spare = _SPARES.get(sw)
        if spare is not None and spare.lent():
            return None
        if spare is None or spare.buffer.shape != shape or spare.buffer.dtype != sw.dtype:
            if not recording():  # made by training steps alone: inference keeps no W beside the weights
                return None
            spare = _Spare(torch.empty(shape, dtype=sw.dtype))
            try:
                _SPARES[sw] = spare
            except TypeError:  # tensors that take no weak reference keep no buffer
                return None
        spare.packing = True
        return spare


def _give_back(spare, token) -> None:
    """The forward is done with spare: free, or held by its backward (token: the forward's)."""
    with _SPARES_LOCK:
        spare.packing, spare.holder = False, None if token is None else weakref.ref(token)


def _take(bw, sw, sc, needed=True):
    """The forward's W if the weights are still those it packed (same objects and versions), else a
    fresh pack; None when not needed. Either way nothing stays held. Forward never reads it: weights
    changed through .data keep their version."""
    w = take(sw, "packed", (_key(bw), _key(sw), _key(sc)))
    if not needed:
        return None
    return _pack(bw, sw, sc) if w is None else w


def forward(expand, x, grid, bw, sw, sc, k):
    """y (..., out); expand(x_tile, grid, k, derivative, base, out) writes A tiles."""
    spare, token = _borrow(bw, sw, sc), None
    try:
        w = _pack(bw, sw, sc, None if spare is None else spare.buffer)
        if recording() and x.requires_grad:  # the backward's dA = gy·W reuses W (no dA: nothing to hold)
            token = hold(sw, "packed", (_key(bw), _key(sw), _key(sc)), w)
        return _forward_tiles(expand, x, grid, w, bw is not None, k)
    finally:
        if spare is not None:
            _give_back(spare, token)


def _forward_tiles(expand, x, grid, w, base, k):
    in_f, (out_f, width) = x.shape[-1], w.shape
    rows = math.prod(x.shape[:-1])
    x2 = x.reshape(rows, in_f)
    y = torch.empty(rows, out_f, dtype=x.dtype, device=x.device)
    if rows == 0 or out_f == 0:
        return y.view(*x.shape[:-1], out_f)
    if width == 0:
        return y.zero_().view(*x.shape[:-1], out_f)
    tile = _rows_per_tile(rows, width, x.element_size(), 1)
    ws = torch.empty(tile * width, dtype=x.dtype, device=x.device)
    for r0 in range(0, rows, tile):
        n = min(tile, rows - r0)
        a = ws[:n * width].view(n, width)
        expand(x2[r0:r0 + n], grid, k, 0, base, a)
        torch.mm(a, w.t(), out=y[r0:r0 + n])
    return y.view(*x.shape[:-1], out_f)


def backward(expand, contract, x, grid, bw, sw, sc, gy, k, need_x=True, need_weights=True, unpack=None):
    """(grad_x, grad_base_weight, grad_spline_weight, grad_spline_scaler); absent or unneeded ones are
    (0,). The weight gradient is two GEMMs per tile (base and spline columns of A) into their own
    buffers; the spline part is grad_spline_weight itself when there is no scaler."""
    out_f, in_f, nb = sw.shape
    rows, base = math.prod(x.shape[:-1]), bw is not None
    x2, gy2 = x.reshape(rows, in_f), gy.reshape(rows, out_f)
    w = _take(bw, sw, sc, need_x)  # W is read by dA = gy·W alone
    width, b0 = (base + nb) * in_f, in_f if base else 0
    tile = _rows_per_tile(rows, width, x.element_size(), 1 + need_x)
    # fp16/bf16 weight gradients summed over several tiles in fp32; one tile is one GEMM, which sums in
    # fp32 and rounds once, as nn.Linear's weight gradient does: no fp32 copy of the weights' size
    acc = torch.float32 if x.dtype in _LOW and tile < rows else x.dtype
    # Unneeded outputs: each its own empty tensor (an op's outputs never alias).
    gx = torch.empty(rows, in_f, dtype=x.dtype, device=x.device) if need_x else x.new_zeros(0)
    if need_weights:
        gsp = torch.empty(out_f, in_f * nb, dtype=acc, device=x.device)
        gbw = torch.empty(out_f, in_f, dtype=acc, device=x.device) if base else x.new_zeros(0)
    else:
        gsp = gbw = x.new_zeros(0)
    if rows == 0 or width == 0 or out_f == 0:
        gsp.zero_(), gbw.zero_(), gx.zero_()
    else:
        ws = torch.empty(1 + need_x, tile * width, dtype=x.dtype, device=x.device)
        for r0 in range(0, rows, tile):
            n = min(tile, rows - r0)
            xt, gt = x2[r0:r0 + n], gy2[r0:r0 + n]
            if need_weights:
                a = ws[0, :n * width].view(n, width)
                expand(xt, grid, k, 0, base, a)
                accumulate(gsp, gt.t(), a[:, b0:], r0 == 0)
                if base:
                    accumulate(gbw, gt.t(), a[:, :b0], r0 == 0)
            if need_x:
                da = ws[-1, :n * width].view(n, width)
                torch.mm(gt, w, out=da)
                contract(xt, grid, da, k, 1, base, gx[r0:r0 + n])
        ws = a = da = w = None  # workspace and W freed before the unpacking allocates
    gx = gx.view(x.shape) if need_x else gx
    if not need_weights:
        return gx, x.new_zeros(0), x.new_zeros(0), x.new_zeros(0)
    gsp = gsp.view(out_f, in_f, nb)
    if sc is None:
        return gx, gbw.to(x.dtype), gsp.to(x.dtype), x.new_zeros(0)
    if unpack is not None and acc == x.dtype:  # one pass: gsp becomes grad_spline_weight in place
        gsc = torch.empty(out_f, in_f, dtype=x.dtype, device=x.device)
        unpack(gsp, sw, sc, gsp, gsc)
        return gx, gbw, gsp, gsc
    gsc = _dot_last(gsp, sw, tile * width).to(x.dtype)
    return gx, gbw.to(x.dtype), gsp.mul_(sc.unsqueeze(-1)).to(x.dtype), gsc


def _dot_last(a, b, budget: int):
    """sum_j a[o, i, j]·b[o, i, j] in a's dtype, by blocks of o whose product holds at most ~budget elements
    (never a whole (out, in, n_basis) product or copy of b). Not a batched GEMV: torch.bmm of (out·in) 1 x
    n_basis by n_basis x 1 products took 0.67 ms of an H200's 2.1 ms bf16 step at 1024->1024, G=5
    (cuBLAS gemv); these blocks are memory-bound elementwise passes (2.4x faster on the CPU too)."""
    out = torch.empty(a.shape[:2], dtype=a.dtype, device=a.device)
    step = max(1, budget // max(1, math.prod(a.shape[1:])))
    for o0 in range(0, a.shape[0], step):
        torch.sum(a[o0:o0 + step] * b[o0:o0 + step], dim=-1, out=out[o0:o0 + step])
    return out


@functools.lru_cache(maxsize=None)
def _wide_gemm(device_type: str) -> bool:
    """Whether torch's mm / addmm take out_dtype (fp16/bf16 products written and summed in fp32) on this
    device type: CUDA, where the overloads exist (recent torch) and have a CUDA kernel."""
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    return device_type == "cuda" and all(hasattr(op, "dtype_out") and has_kernel(op.dtype_out.name(), "CUDA")
                                         for op in (torch.ops.aten.mm, torch.ops.aten.addmm))


def accumulate(dst, a, b, first: bool) -> None:
    """dst (+)= a @ b; dst may be wider than the product's dtype (fp32 sums of fp16/bf16 tiles): where
    the GEMM takes out_dtype (CUDA) it writes and accumulates fp32 itself (no product rounded to
    fp16/bf16, no temporary), elsewhere each tile's product is added to dst."""
    if dst.dtype == a.dtype:
        if first:
            torch.mm(a, b, out=dst)
        else:
            dst.addmm_(a, b)
        return
    if _wide_gemm(dst.device.type):
        if first:
            torch.mm(a, b, out_dtype=dst.dtype, out=dst)
        else:
            torch.addmm(dst, a, b, out_dtype=dst.dtype, out=dst)
        return
    if first:
        dst.copy_(torch.mm(a, b))
    else:
        dst += torch.mm(a, b)
