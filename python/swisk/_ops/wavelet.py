"""The wavelet KAN family: one description per op (C++ validates, Python allocates, C++ launches)."""
from __future__ import annotations

import math

import torch

from .. import _C, reference
from .define import define, invoke, wrapper
from .run import OpSpec

WAVELETS = tuple(_C.wavelet_names().split(", "))  # the kernel header's list, in id order


def check_wavelet(op: str, wavelet) -> str:
    if not isinstance(wavelet, str):
        raise TypeError(f"[{op}] wavelet: expected a str, got {type(wavelet).__name__}")
    if wavelet not in WAVELETS:
        raise ValueError(f"[{op}] wavelet: unknown wavelet {wavelet!r}; valid: {', '.join(WAVELETS)}")
    return wavelet


def _fake_forward(x, scale, translation, weight, wavelet):
    check_wavelet("wavelet_kan", wavelet)
    for name, t in (("scale", scale), ("translation", translation), ("weight", weight)):
        torch._check(t.dim() == 2 and t.shape[0] == weight.shape[0] and t.shape[1] == x.shape[-1],
                     lambda: f"[wavelet_kan] {name}: must be (out, in) with in = x.shape[-1]")
    return [(*x.shape[:-1], weight.shape[0])]


def _fake_backward(x, scale, translation, weight, grad_out, wavelet):
    check_wavelet("wavelet_kan_backward", wavelet)
    return [tuple(t.shape) for t in (x, scale, translation, weight)]


def _backward(need, saved, scalars, grads):
    if not any(need):
        return None, None, None, None
    g = invoke(wavelet_kan_backward_op, *saved, grads[0], *scalars)
    return tuple(t if n else None for t, n in zip(g, need))


def _backward_ref(x, scale, translation, weight, grad_out, wavelet):
    """The backward's formulation, differentiable to any order under every transform: with u = (x - t) / s
    per (row, output, input), dy/dx = w·psi'(u)/s = -dy/dt, dy/ds = -u·dy/dx, dy/dw = psi(u); psi' from
    a forward-mode tangent of the elementwise psi (a pullback held across calls would leave its
    torch.func level under nested reverse transforms)."""
    u = (x.unsqueeze(-2) - translation) / scale  # (..., out, in)
    psi, dpsi = torch.func.jvp(lambda v: reference.wavelet(v, wavelet), (u,), (torch.ones_like(u),))
    g = grad_out.unsqueeze(-1)
    a = g * weight * dpsi / scale
    lead = math.prod(u.shape[:-2])  # the rows, counted: a -1 cannot be inferred for an empty (out, in)
    rows = lambda v: v.reshape(lead, *weight.shape).sum(0)  # noqa: E731  (sum over the leading dims)
    return a.sum(-2), rows(-(a * u)), rows(-a), rows(g * psi)


WAVELET_KAN = OpSpec(
    name="wavelet_kan", inputs=("x", "scale", "translation", "weight"), scalars=(("wavelet", str),),
    outputs=("out",), prepare=_C.wavelet_kan_prepare, backward=_backward, reference=reference.wavelet_kan,
    autocast="fp32", row_outputs=("out",),
    fake_shapes=_fake_forward,
    doc="""Wav-KAN's wavelet layer, fused: x (..., in); scale, translation, weight (out, in) ->
    y (..., out) with y[..., o] = sum_i weight[o, i] * psi((x[..., i] - translation[o, i]) / scale[o, i]).

    wavelet: "mexican_hat", "morlet", "dog", "meyer" or "shannon", exactly as Wav-KAN defines them
    (shannon is the bare sinc; Wav-KAN's Hamming window is the layer's, see swisk.nn.WaveletKANLinear).
    The (batch, out, in) tensor is never formed, forward or backward; all four inputs are
    differentiable, with deterministic (fixed-order) reductions.

    Under torch.autocast the inputs are cast to float32 (the result is float32).

    Second derivatives and forward-mode tangents (jvp, jacfwd, hessian) come from the plain-torch
    formulation, which builds the (batch, out, in) tensor; first-order gradients do not.

    scale must be non-zero: on CPU tensors a zero raises ValueError; on GPUs (whose memory is not
    read on the host) a zero scale gives the inf / NaN the division gives. Negative scales are allowed.

    Args:
        x: (..., in) floating tensor.
        scale, translation, weight: (out, in) tensors in x's dtype and device.
        wavelet: the mother wavelet's name.

    Returns:
        (..., out) tensor (float32 under autocast).

    Raises:
        TypeError / ValueError naming the argument for wrong types, dtypes, devices, shapes, an unknown
        wavelet or a zero scale.
    """)

WAVELET_KAN_BACKWARD = OpSpec(
    name="wavelet_kan_backward", inputs=("x", "scale", "translation", "weight", "grad_out"),
    scalars=(("wavelet", str),), outputs=("grad_x", "grad_scale", "grad_translation", "grad_weight"),
    prepare=_C.wavelet_kan_backward_prepare, reference=_backward_ref, row_outputs=("grad_x",),
    fake_shapes=_fake_backward)

wavelet_kan_op = define(WAVELET_KAN)
wavelet_kan_backward_op = define(WAVELET_KAN_BACKWARD)
kan = wrapper(WAVELET_KAN, wavelet_kan_op)
