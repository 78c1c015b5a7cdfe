"""The sketched linear layer (Panther's SKLinear math) as vendor GEMMs through two (batch, T·r)
intermediates: y = ((x·[S1_1..S1_T])·[U1_1; ..; U1_T] + (x·[U2_1..U2_T])·[S2_1; ..; S2_T]) / (2T) + bias. Plain
torch ops: autograd, double backward, forward mode, vmap and compile come from torch; the (T, batch,
in) expansion of the formulation never exists."""
from __future__ import annotations

import math

import torch

from .._backend import autocast_enabled
from ..reference.sketched import srht_blocks, term_seed
from .sketch import _check_args, srht_op, srht_transpose_op
from .conv import _tuple
from .define import invoke

_OP = "sketched_linear"


def _check_tensors(op, named):
    x = named["x"]
    for name, t in named.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"[{op}] {name}: expected a torch.Tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"[{op}] {name}: expected a floating dtype, got {t.dtype}")
        if t.dtype != x.dtype and not autocast_enabled(x.device.type):
            raise TypeError(f"[{op}] {name}: dtype {t.dtype} differs from x's {x.dtype}")
        if t.device != x.device:
            raise ValueError(f"[{op}] {name}: on {t.device}, x on {x.device}")


def _check(x, S1s, S2s, bias, op=_OP, **operators):
    """Types, dtypes, devices and shapes of the layer's tensors: S1s (T, in, r) and S2s (T, r, out) set the
    sizes, the operators (U1s, U2s) when given must match them."""
    named = {"x": x, "S1s": S1s, "S2s": S2s, **operators}
    if bias is not None:
        named["bias"] = bias
    _check_tensors(op, named)
    for name in ("S1s", "S2s", *operators):
        if named[name].dim() != 3:
            raise ValueError(f"[{op}] {name}: must be 3-d (num_terms, ...), got shape {tuple(named[name].shape)}")
    t, fin, r = S1s.shape
    out = S2s.shape[2]
    want = {"S1s": (t, fin, r), "S2s": (t, r, out), "U1s": (t, r, out), "U2s": (t, fin, r)}
    for name in [n for n in want if n in named]:
        if tuple(named[name].shape) != want[name]:
            raise ValueError(f"[{op}] {name}: must be {want[name]} (num_terms, in, r from S1s; out from S2s), "
                             f"got {tuple(named[name].shape)}")
    if t == 0:
        raise ValueError(f"[{op}] S1s: needs at least one term, got num_terms = 0")
    if x.dim() == 0 or x.shape[-1] != fin:
        raise ValueError(f"[{op}] x: last dimension must be in_features = {fin}, got shape {tuple(x.shape)}")
    if bias is not None and tuple(bias.shape) != (out,):
        raise ValueError(f"[{op}] bias: must be ({out},), got {tuple(bias.shape)}")


def sketched_linear(x, S1s, S2s, U1s, U2s, bias=None):
    """Panther's sketched linear layer: 1/(2T)·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i) + bias.

    Args:
        x: (..., in).
        S1s: (T, in, r) and S2s: (T, r, out), the learned factors; U1s: (T, r, out) and U2s: (T, in, r),
            the fixed random ones (all differentiable here).
        bias: (out,) or None.

    Returns:
        (..., out), from four GEMMs through two (batch, T·r) intermediates or, where that takes fewer
        multiply-adds (batches large against in·out / (T·r)), through the layer's (in, out) matrix (the
        vendor's GEMM in every dtype; fp16/bf16 under autocast accumulate in fp32), any batch and
        feature sizes.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices or shapes.
    """
    _check(x, S1s, S2s, bias, U1s=U1s, U2s=U2s)
    if autocast_enabled(x.device.type):
        dt = torch.get_autocast_dtype(x.device.type)
        x, S1s, S2s, U1s, U2s = (t.to(dt) for t in (x, S1s, S2s, U1s, U2s))
        bias = None if bias is None else bias.to(dt)
    t, fin, r = S1s.shape
    fout = S2s.shape[2]
    x2 = x.reshape(math.prod(x.shape[:-1]), fin)  # sizes spelled out: in = 0 or r = 0 leaves no -1 to infer
    c = 0.5 / t
    if _dense_is_cheaper(x2.shape[0], fin, S2s.shape[2], t * r, torch.is_grad_enabled() and any(
            v.requires_grad for v in (x, S1s, S2s, U1s, U2s))):
        # The layer's matrix W = c·([S1 | U2]·[U1 ; S2]) (in, out), then one GEMM: fewer products when the
        # batch is large against in·out / (T·r) (_dense_is_cheaper); autograd takes the gradients through W
        w = torch.mm(S1s.transpose(0, 1).reshape(fin, t * r), U1s.reshape(t * r, fout))
        w = torch.addmm(w, U2s.transpose(0, 1).reshape(fin, t * r), S2s.reshape(t * r, fout)).mul(c)
        y = torch.mm(x2, w) if bias is None else torch.addmm(bias, x2, w)
        return y.reshape(*x.shape[:-1], y.shape[-1])
    # One GEMM per factor, so autograd differentiates only the learned ones: backward is dZ1 = gy·U1ᵀ,
    # dZ2 = gy·S2ᵀ, dS1 = xᵀ·dZ1, dS2 = Z2ᵀ·gy, dx = dZ1·S1ᵀ + dZ2·U2ᵀ (a concatenated [S1 | U2] would
    # also compute the U halves' gradients: a third more backward FLOPs). (T, r, out) is (T·r, out) as is.
    z1 = torch.mm(x2, S1s.transpose(0, 1).reshape(fin, t * r))                  # (batch, T·r)
    z2 = torch.mm(x2, U2s.transpose(0, 1).reshape(fin, t * r))
    u1 = U1s.reshape(t * r, fout)
    y = torch.mm(z1, u1) * c if bias is None else torch.addmm(bias, z1, u1, alpha=c)
    y = torch.addmm(y, z2, S2s.reshape(t * r, fout), alpha=c)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def _dense_is_cheaper(batch: int, fin: int, out: int, tr: int, training: bool) -> bool:
    """Multiply-adds of sketched_linear's two forms (T·r = tr): through W = c·[S1 | U2]·[U1 ; S2], forming
    W (2·in·tr·out) and x·W (batch·in·out; a backward adds 2·batch·in·out for dx and W's gradient and
    2·in·tr·out for the factors'), against through the (batch, T·r) intermediates (2·batch·tr·(in + out),
    a backward 3·batch·tr·(in + out)). CPU measurements: benchmarks/README.md."""
    io, tio = fin * out, tr * (fin + out)
    if training:
        return 4 * io * tr + 3 * batch * io < 5 * batch * tio
    return 2 * io * tr + batch * io < 2 * batch * tio


def sketched_conv2d(x, S1s, U1s, bias=None, stride=1, padding=0):
    """Panther's sketched convolution: conv2d(x, S1s) into the L·r channels (the vendor's convolution), then
    the fixed U1s combination of each pixel divided by L (the vendor's batched GEMM); where it takes fewer
    multiply-adds (L·r above the output channels, as a rule), one convolution with the kernel (U1sᵀ/L)·S1s.

    Args:
        x: (N, C, H, W). S1s: (L·r, C, kh, kw) learned; U1s: (L, r, out) fixed; bias: (out,) or None.
        stride, padding: as torch's conv2d.

    Returns:
        (N, out, H', W').

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices or shapes.
    """
    op = "sketched_conv2d"
    named = {"x": x, "S1s": S1s, "U1s": U1s} if bias is None else {"x": x, "S1s": S1s, "U1s": U1s, "bias": bias}
    _check_tensors(op, named)
    if S1s.dim() != 4 or U1s.dim() != 3 or S1s.shape[0] != U1s.shape[0] * U1s.shape[1]:
        raise ValueError(f"[{op}] S1s: must be (L·r, C, kh, kw) with U1s (L, r, out), got {tuple(S1s.shape)} and "
                         f"{tuple(U1s.shape)}")
    if x.dim() != 4 or x.shape[1] != S1s.shape[1]:
        raise ValueError(f"[{op}] x: must be (N, C={S1s.shape[1]}, H, W), got {tuple(x.shape)}")
    if bias is not None and tuple(bias.shape) != (U1s.shape[2],):
        raise ValueError(f"[{op}] bias: must be ({U1s.shape[2]},), got {tuple(bias.shape)}")
    if S1s.shape[0] == 0:
        raise ValueError(f"[{op}] S1s: needs at least one sketch channel (L·r >= 1), got U1s {tuple(U1s.shape)}")
    pixels = _check_geometry(op, x, S1s, stride, padding)
    lr, out = S1s.shape[0], U1s.shape[2]
    u = (U1s.reshape(lr, out).T / U1s.shape[0]).to(x.dtype)                       # (out, L·r)
    if out > 0 and _effective_kernel_is_cheaper(S1s, out, pixels):  # conv2d takes no empty kernel
        # The layer is the convolution with kernel u·S1s (out, C, kh, kw): its multiply-adds against the
        # L·r-channel convolution and the per-pixel combination (routes below)
        kernel = torch.matmul(u, S1s.reshape(lr, -1)).view(out, *S1s.shape[1:])
        return torch.nn.functional.conv2d(x, kernel, None if bias is None else bias.to(x.dtype), stride, padding)
    t = torch.nn.functional.conv2d(x, S1s, None, stride, padding)
    b, _, h, w = t.shape
    # The U1s combination as a batched GEMM over pixels (forward+backward 1.13x Panther's formulation on
    # the CPU against 1.09x for the same product as a 1x1 convolution: 25 interleaved steps, 1 thread).
    y = torch.matmul(u, t.reshape(b, lr, h * w))
    if bias is not None:
        y = y + bias.to(y.dtype)[:, None]
    return y.view(b, out, h, w)


_MAX_EXTENT = 1 << 31  # strides and padded sizes


def _check_geometry(op, x, S1s, stride, padding) -> int:
    """stride (int or pair, >= 1) and padding (int or pair, >= 0, 'valid', or 'same' at stride 1) as conv2d
    takes them, and an output of at least one pixel per side, checked in op's name; returns the output's
    pixels N·H'·W' (dilation 1)."""
    sh, sw = _tuple(op, "stride", stride, 2, 1)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"[{op}] padding: expected 'same', 'valid', an int or a pair, got {padding!r}")
        if padding == "same" and (sh, sw) != (1, 1):
            raise ValueError(f"[{op}] padding: 'same' needs stride 1 (as torch's conv2d), got {(sh, sw)}")
        ph, pw = (0, 0)
    else:
        ph, pw = _tuple(op, "padding", padding, 2, 0)
    (h, w), (kh, kw) = x.shape[2:], S1s.shape[2:]
    if (h == 0 or w == 0) and x.shape[0] * x.shape[1] > 0:
        raise ValueError(f"[{op}] x: spatial sizes must be >= 1 (as torch's conv2d), got {tuple(x.shape)}")
    # the bounds kan_conv's C++ check sets (cpp/src/conv.cpp): torch's convolutions fail past them
    # with no name ("could not construct a memory descriptor")
    if max(sh, sw) >= _MAX_EXTENT:
        raise ValueError(f"[{op}] stride: every value must be below 2^31, got {stride!r}")
    if max(h + 2 * ph, w + 2 * pw) >= _MAX_EXTENT:
        raise ValueError(f"[{op}] padding: the padded size must be below 2^31 in every dimension, got "
                         f"({h + 2 * ph}, {w + 2 * pw})")
    elements = x.shape[0] * x.shape[1] * (h + 2 * ph) * (w + 2 * pw)
    if elements >= 1 << 48:
        raise ValueError(f"[{op}] padding: the padded input would hold {elements} elements (at most 2^48 are "
                         "supported)")
    if padding == "same":
        return x.shape[0] * h * w
    if h + 2 * ph < kh or w + 2 * pw < kw:
        raise ValueError(f"[{op}] x: its padded size ({h + 2 * ph}, {w + 2 * pw}) is smaller than the kernel "
                         f"({kh}, {kw})")
    return x.shape[0] * ((h + 2 * ph - kh) // sh + 1) * ((w + 2 * pw - kw) // sw + 1)


def _effective_kernel_is_cheaper(S1s, out: int, p: int) -> bool:
    """Multiply-adds of the two forms of a sketched convolution (P pixels, L·r sketch channels, K = C·kh·kw):
    the kernel u·S1s (out·L·r·K) and the convolution into out channels (P·out·K), against the convolution
    into L·r channels (P·L·r·K) and the per-pixel combination (P·L·r·out). The backward's products scale
    alike. CPU, b32 64->64 32x32 3x3 T=6 r=8 (L·r = 96): see benchmarks/README.md."""
    lr, k = S1s.shape[0], S1s[0].numel()
    return out * k * (lr + p) < lr * p * (k + out)


def _srht_apply(v, t, r, n, seed, stream, transpose):
    """v·Uᵀ (v (..., n) -> (..., T·r)) or, transposed, v·U (v (..., T·r) -> (..., n)) for the stacked SRHT
    operator U (T·r, n) of stream 0 (U1) or 1 (U2ᵀ), as (w, a) with v·Uᵀ (or v·U) = a·w: the blocks' scale
    √(k_b / r) is returned for the caller to fold into its next product when every block has the same."""
    blocks = srht_blocks(t, r, n)
    uniform = len(set(blocks)) == 1
    a = math.sqrt(blocks[0]) if uniform else 1.0
    pieces = v.split([terms * r for terms in blocks], -1) if transpose else [v] * len(blocks)  # split: one cat back
    parts = []
    for b, (terms, piece) in enumerate(zip(blocks, pieces)):
        s = term_seed(seed, 2 * b + stream)
        w = invoke(srht_transpose_op, piece, n, s) if transpose else invoke(srht_op, piece, terms * r, s)
        parts.append(w if uniform else w * math.sqrt(terms))
    if len(parts) == 1:
        return parts[0], a
    if transpose:
        return sum(parts[1:], parts[0]), a
    return torch.cat(parts, -1), a


def _check_srht(op, S1s, S2s, seed):
    t, fin, r = S1s.shape
    fout = S2s.shape[2]
    if r == 0:
        raise ValueError(f"[{op}] S1s: low rank r must be >= 1 (each SRHT block keeps r rows per term), got "
                         f"shape {tuple(S1s.shape)}")
    if r > min(fin, fout):
        raise ValueError(f"[{op}] S1s: low rank r = {r} must not exceed min(in, out) = {min(fin, fout)} (each SRHT "
                         f"block keeps at most n of its rows)")
    _check_args(op, "gaussian", 1, seed, 1)


def srht_sketched_linear(x, S1s, S2s, seed, bias=None):
    """Panther's sketched linear layer with seeded SRHT operators: 1/(2T)·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i) +
    bias, where U1 (T·r, out) and U2ᵀ (T·r, in) stacked are blocks of rows of randomized Hadamard transforms
    (swisk.reference.sketched.srht_operator: entries ±1/√r like Panther's scaled signs) applied in
    O(n log n) per row through swisk.ops.srht and its transpose, never materialised. Two of the four GEMMs
    (and two of the backward's six) become FWHTs: 3/5 of sketched_linear's GEMM FLOPs, no stored U.

    Args:
        x: (..., in).
        S1s: (T, in, r) and S2s: (T, r, out), the learned factors, r <= min(in, out).
        seed: 0 <= seed < 2^63: the operators (the same on every device and thread count).
        bias: (out,) or None.

    Returns:
        (..., out); differentiable in x, S1s, S2s and bias to any order, forward mode included.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices, shapes or seed.
    """
    op = "srht_sketched_linear"
    _check(x, S1s, S2s, bias, op)
    _check_srht(op, S1s, S2s, seed)
    if autocast_enabled(x.device.type):
        dt = torch.get_autocast_dtype(x.device.type)
        x, S1s, S2s = (t.to(dt) for t in (x, S1s, S2s))
        bias = None if bias is None else bias.to(dt)
    t, fin, r = S1s.shape
    fout = S2s.shape[2]
    x2 = x.reshape(math.prod(x.shape[:-1]), fin)
    c = 0.5 / t
    z1 = torch.mm(x2, S1s.transpose(0, 1).reshape(fin, t * r))                  # (batch, T·r)
    z2, a2 = _srht_apply(x2, t, r, fin, seed, 1, False)                           # x·U2 through the FWHT
    s2 = S2s.reshape(t * r, fout)
    y = torch.mm(z2, s2) * (c * a2) if bias is None else torch.addmm(bias, z2, s2, alpha=c * a2)
    y1, a1 = _srht_apply(z1, t, r, fout, seed, 0, True)                           # z1·U1 through the FWHT
    y = torch.add(y, y1, alpha=c * a1)
    return y.reshape(*x.shape[:-1], fout)


def srht_sketched_operators(num_terms: int, low_rank: int, in_features: int, out_features: int, seed: int,
                            dtype=torch.float32, device="cpu"):
    """The operators srht_sketched_linear applies, materialised: (U1s (T, r, out), U2s (T, in, r)), so
    srht_sketched_linear(x, S1s, S2s, seed, b) = sketched_linear(x, S1s, S2s, U1s, U2s, b).

    Args:
        num_terms, low_rank: T and r (r <= min(in_features, out_features)).
        in_features, out_features: the layer's widths.
        seed: 0 <= seed < 2^63.
        dtype, device: of the result.

    Returns:
        (U1s, U2s).

    Raises:
        TypeError / ValueError naming the argument for wrong sizes or seed.
    """
    op = "srht_sketched_operators"
    for name, v in (("num_terms", num_terms), ("low_rank", low_rank), ("in_features", in_features),
                    ("out_features", out_features)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"[{op}] {name}: expected an int, got {type(v).__name__}")
        if v < 1:
            raise ValueError(f"[{op}] {name}: must be >= 1, got {v}")
    t, r = num_terms, low_rank
    if r > min(in_features, out_features):
        raise ValueError(f"[{op}] low_rank: {r} must not exceed min(in_features, out_features) = "
                         f"{min(in_features, out_features)}")
    _check_args(op, "gaussian", 1, seed, 1)
    eye = torch.eye(t * r, dtype=dtype, device=device)
    u1, a1 = _srht_apply(eye, t, r, out_features, seed, 0, True)
    u2, a2 = _srht_apply(eye, t, r, in_features, seed, 1, True)
    return (u1 * a1).view(t, r, out_features), (u2 * a2).view(t, r, in_features).transpose(1, 2)
