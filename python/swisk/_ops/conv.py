"""KAN convolution: one description for the op and its backward (C++ validates once; the GEMM route of
conv_gemm.py runs), and the public kan_conv1d / kan_conv2d / kan_conv3d."""
from __future__ import annotations

import numbers

import torch

from .. import _C, reference
from . import conv_gemm
from .define import define, errors_named, invoke, wrapper
from .run import OpSpec
from .spline import _contract_into, _expand_into, gradient_shapes, kan_expand_op, vjp_through

ACTIVATIONS = tuple(_C.kan_conv_activations().split(", "))
_SCALARS = (("spline_order", int), ("stride", list), ("padding", list), ("dilation", list), ("groups", int),
            ("base_activation", str))


def _shapes(x, grid, bw, sw, sc, k, stride, padding, dilation, groups, act):
    d = sw.dim() - 2
    torch._check(1 <= d <= 3 and x.dim() >= d + 1, lambda: "[kan_conv] spline_weight: 1 to 3 kernel dimensions")
    spatial = x.shape[-d:]
    out = [(s + padding[2 * i] + padding[2 * i + 1] - dilation[i] * (sw.shape[2 + i] - 1) - 1) // stride[i] + 1
           for i, s in enumerate(spatial)]
    return [(*x.shape[:-d - 1], sw.shape[0], *out)]


def _out_like(x, shape):
    d = len(shape) - 2
    if conv_gemm.channels_last(x, d):
        fmt = torch.channels_last if d == 2 else torch.channels_last_3d
        return x.new_empty(shape).contiguous(memory_format=fmt)
    return x.new_empty(shape)


def _forward(tensors, scalars):
    return conv_gemm.forward(_expand_into, *tensors, *scalars)


def _backward_route(tensors, scalars):
    return conv_gemm.backward(_expand_into, _contract_into, *tensors, *scalars)


def _by_kernels(x, grid, bw, sw, sc, k, stride, padding, dilation, groups, act):
    """The forward written with swisk's kan_expand (differentiable to any order) and torch's conv, without
    tiles: what the backward's own derivatives differentiate. Holds the bases of the whole padded input."""
    g = conv_gemm.Geometry(x, sw, k, stride, padding, dilation, groups)
    xp = conv_gemm.pad(x, g, float("-inf"))
    e = invoke(kan_expand_op, xp.movedim(1, -1).contiguous(), grid, k, 0, False)   # (N, *S_padded, C·n_basis)
    y = conv_gemm._CONV[g.d - 1](e.movedim(-1, 1), reference.conv.scaled_spline_weight(sw, sc), None, stride, 0,
                                 dilation, groups)
    if bw is not None:
        xa = conv_gemm.pad(reference.conv.ACTIVATIONS[act](x), g, 0.0)
        y = y + conv_gemm._CONV[g.d - 1](xa, bw, None, stride, 0, dilation, groups)
    return y.reshape(*g.lead, g.o, *g.out)


_backward_by_kernels = vjp_through(_by_kernels)
_backward_ref = vjp_through(reference.kan_conv)


def _backward(need, saved, scalars, grads):
    x, grid, bw, sw, sc = saved
    gx, gbw, gsw, gsc = invoke(kan_conv_backward_op, x, grid, bw, sw, sc, grads[0], *scalars, bool(need[0]),
                               any(need[2:]))
    return (gx if need[0] else None, None, gbw if need[2] else None, gsw if need[3] else None,
            gsc if need[4] else None)


KAN_CONV = OpSpec(
    name="kan_conv", inputs=("x", "grid", "base_weight?", "spline_weight", "spline_scaler?"), scalars=_SCALARS,
    outputs=("out",), prepare=_C.kan_conv_prepare, composite=_forward, backward=_backward,
    reference=reference.kan_conv, autocast="lower", row_outputs=("out",), strided=True, out_like=_out_like,
    fake_shapes=_shapes)

KAN_CONV_BACKWARD = OpSpec(
    name="kan_conv_backward", inputs=("x", "grid", "base_weight?", "spline_weight", "spline_scaler?", "grad_out"),
    scalars=_SCALARS + (("need_x", bool), ("need_weights", bool)),
    outputs=("grad_x", "grad_base_weight", "grad_spline_weight", "grad_spline_scaler"),
    prepare=_C.kan_conv_backward_prepare, composite=_backward_route, reference=_backward_ref,
    derivatives=_backward_by_kernels, row_outputs=("grad_x",), strided=True,
    fake_shapes=lambda x, grid, bw, sw, sc, g, *s: gradient_shapes(x, bw, sw, sc, s[-2], s[-1]))

kan_conv_op = define(KAN_CONV)
kan_conv_backward_op = define(KAN_CONV_BACKWARD)
_kan_conv = wrapper(KAN_CONV, kan_conv_op)


def _tuple(op, name, v, d, lo):
    """An int or d ints (numpy's too), each >= lo, as a list of d Python ints; errors name op and argument."""
    def whole(e):
        return isinstance(e, numbers.Integral) and not isinstance(e, bool)
    if whole(v):
        v = (v,) * d
    if not isinstance(v, (tuple, list)) or len(v) != d or not all(whole(e) for e in v):
        raise TypeError(f"[{op}] {name}: expected an int or {d} ints, got {v!r}")
    if any(e < lo for e in v):
        raise ValueError(f"[{op}] {name}: every value must be >= {lo}, got {v!r}")
    return [int(e) for e in v]


def _padding(op, padding, d, stride, dilation, kernel):
    """int, d ints, 'valid' or 'same' -> (before, after) per dim ('same' as torch pads it: the odd one after)."""
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * (2 * d)
        if padding != "same":
            raise ValueError(f"[{op}] padding: expected an int, {d} ints, 'same' or 'valid', got {padding!r}")
        if any(s != 1 for s in stride):
            raise ValueError(f"[{op}] padding: 'same' needs stride 1, got stride {tuple(stride)}")
        pads = []
        for dil, kd in zip(dilation, kernel):
            total = dil * (kd - 1)
            pads += [total // 2, total - total // 2]
        return pads
    return [p for v in _tuple(op, "padding", padding, d, 0) for p in (v, v)]


def _public(d: int):
    name = f"kan_conv{d}d"

    def fn(x, grid, base_weight, spline_weight, spline_scaler=None, spline_order=3, stride=1, padding=0, dilation=1,
           groups=1, base_activation="silu"):
        if not isinstance(spline_weight, torch.Tensor):
            raise TypeError(f"[{name}] spline_weight: expected a torch.Tensor, got {type(spline_weight).__name__}")
        if spline_weight.dim() != d + 2:
            raise ValueError(f"[{name}] spline_weight: must be (out, in_channels/groups·n_basis, {d} kernel sizes), "
                             f"got shape {tuple(spline_weight.shape)}")
        if not isinstance(base_activation, str):
            raise TypeError(f"[{name}] base_activation: expected a str, got {type(base_activation).__name__}")
        if base_activation not in ACTIVATIONS:
            raise ValueError(f"[{name}] base_activation: unknown activation {base_activation!r}; valid: "
                             f"{', '.join(ACTIVATIONS)}")
        stride = _tuple(name, "stride", stride, d, 1)
        dilation = _tuple(name, "dilation", dilation, d, 1)
        pads = _padding(name, padding, d, stride, dilation, spline_weight.shape[2:])
        with errors_named("kan_conv", name):
            return _kan_conv(x, grid, base_weight, spline_weight, spline_scaler, spline_order, stride, pads,
                             dilation, groups, base_activation)

    fn.__name__ = fn.__qualname__ = name
    fn.__module__ = "swisk.ops"
    fn.__doc__ = f"""KAN convolution over {d} spatial dimension(s) (torch-conv-kan's layer without its norm):
    conv(act(x), base_weight) + conv(B(x), spline_weight·spline_scaler), the B-spline bases of each
    input channel c laid out as channels c·n_basis + j, activations and bases zero-padded.

    Args:
        x: ``(N, C, *S)`` or ``(C, *S)`` (any leading shape), any memory format (channels_last gives
            channels_last).
        grid: (C, n_knots) knots per input channel, strictly increasing.
        base_weight: ``(O, C/groups, *K)``, or None (no base branch).
        spline_weight: ``(O, C/groups·n_basis, *K)``, n_basis = n_knots - 1 - spline_order.
        spline_scaler: ``(O, C/groups, *K)`` scaling each channel's n_basis weights, or None.
        spline_order, stride, padding (int, {d} ints, 'same' or 'valid'), dilation, groups: as torch's conv.
        base_activation: 'silu', 'gelu' (erf) or 'identity'.

    Returns:
        ``(N, O, *S_out)``. Runs on the GEMM route: swisk's kernels write bounded tiles of the unfolded
        bases (swisk.config workspace_bytes), torch's convolution multiplies them (on CUDA, fp32 as TF32
        while ``torch.backends.cudnn.allow_tf32``, torch's default, as for ``nn.Conv2d``: ~1e-3 relative);
        the backward regenerates them (saved state: the inputs). Differentiable in x and every weight to
        any order on swisk's expansion kernels; in grid, and forward-mode tangents, through the plain-torch
        formulation.

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices, shapes or knots.
    """
    return fn


kan_conv1d, kan_conv2d, kan_conv3d = (_public(d) for d in (1, 2, 3))
