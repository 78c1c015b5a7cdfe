"""The wavelet KAN family's custom ops. Inputs are made contiguous here; outputs are allocated here,
never in C++."""
from __future__ import annotations

import torch
from torch import Tensor

from .. import _C
from .._backend import backend_for, call, view
from .common import DEVICES as _DEVICES, concrete as _concrete, prep as _prep, tensor_arg

WAVELETS = ("mexican_hat", "morlet", "dog", "meyer", "shannon")


def check_wavelet(op: str, wavelet) -> str:
    if not isinstance(wavelet, str):
        raise TypeError(f"[{op}] wavelet: expected a str, got {type(wavelet).__name__}")
    if wavelet not in WAVELETS:
        raise ValueError(f"[{op}] wavelet: unknown wavelet {wavelet!r}; valid: {', '.join(WAVELETS)}")
    return wavelet


def _out_shape(op, x, scale, translation, weight, wavelet, data=True):
    if _concrete(x, scale, translation, weight):
        views = [view(op, n, t, data) for n, t in
                 (("x", x), ("scale", scale), ("translation", translation), ("weight", weight))]
        return _C.wavelet_kan_shape(*views, wavelet, backend_for(x))
    check_wavelet(op, wavelet)
    return (*x.shape[:-1], weight.shape[0])


@torch.library.custom_op("swisk::wavelet_kan", mutates_args=(), device_types=_DEVICES)
def wavelet_kan(x: Tensor, scale: Tensor, translation: Tensor, weight: Tensor, wavelet: str) -> Tensor:
    x, scale, translation, weight = _prep(x, scale, translation, weight)
    out = torch.empty(_out_shape("wavelet_kan", x, scale, translation, weight, wavelet), dtype=x.dtype,
                      device=x.device)
    if out.numel():
        call(_C.wavelet_kan, [x, scale, translation, weight, out], wavelet)
    return out


@wavelet_kan.register_fake
def _(x, scale, translation, weight, wavelet):
    return x.new_empty(_out_shape("wavelet_kan", x, scale, translation, weight, wavelet, data=False))


@torch.library.custom_op("swisk::wavelet_kan_backward", mutates_args=(), device_types=_DEVICES)
def wavelet_kan_backward(grad: Tensor, x: Tensor, scale: Tensor, translation: Tensor, weight: Tensor,
                         wavelet: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    grad, x, scale, translation, weight = _prep(grad, x, scale, translation, weight)
    gx, gs, gt, gw = (torch.empty_like(t) for t in (x, scale, translation, weight))
    if gx.numel() or gs.numel():
        call(_C.wavelet_kan_backward, [x, scale, translation, weight, grad, gx, gs, gt, gw], wavelet)
    return gx, gs, gt, gw


@wavelet_kan_backward.register_fake
def _(grad, x, scale, translation, weight, wavelet):
    check_wavelet("wavelet_kan_backward", wavelet)
    return tuple(torch.empty_like(t) for t in (x, scale, translation, weight))


def _setup(ctx, inputs, output):
    x, scale, translation, weight, wavelet = inputs
    ctx.save_for_backward(x, scale, translation, weight)
    ctx.wavelet = wavelet


def _backward(ctx, grad):
    x, scale, translation, weight = ctx.saved_tensors
    if not any(ctx.needs_input_grad[:4]):
        return None, None, None, None, None
    grads = torch.ops.swisk.wavelet_kan_backward(grad, x, scale, translation, weight, ctx.wavelet)
    return (*(g if need else None for g, need in zip(grads, ctx.needs_input_grad[:4])), None)


wavelet_kan.register_autograd(_backward, setup_context=_setup)

# Under autocast the op runs in fp32 (as autocast runs exp and pow): mixed inputs, e.g. a bf16 x from
# an autocast linear layer with fp32 parameters, are cast up rather than refused.
for _dev in _DEVICES:
    if torch.amp.is_autocast_available(_dev):
        torch.library.register_autocast("swisk::wavelet_kan", _dev, torch.float32)


def kan(x: Tensor, scale: Tensor, translation: Tensor, weight: Tensor, wavelet: str) -> Tensor:
    """Wav-KAN's wavelet layer, fused: x (..., in); scale, translation, weight (out, in) ->
    y (..., out) with y[..., o] = sum_i weight[o, i] * psi((x[..., i] - translation[o, i]) / scale[o, i]).

    wavelet: "mexican_hat", "morlet", "dog", "meyer" or "shannon", exactly as Wav-KAN defines them
    (shannon is the bare sinc; Wav-KAN's Hamming window is the layer's, see swisk.nn.WaveletKANLinear).
    The (batch, out, in) tensor is never formed, forward or backward; all four inputs are
    differentiable, with deterministic (fixed-order) reductions.

    Under torch.autocast the inputs are cast to float32 (the result is float32).

    scale must be non-zero: on CPU tensors a zero raises ValueError; on GPUs (whose memory is not
    read on the host) a zero scale gives the inf / NaN the division gives. Negative scales are allowed.
    """
    op = "wavelet_kan"
    check_wavelet(op, wavelet)
    return torch.ops.swisk.wavelet_kan(tensor_arg(op, "x", x), tensor_arg(op, "scale", scale),
                                       tensor_arg(op, "translation", translation), tensor_arg(op, "weight", weight),
                                       wavelet)
