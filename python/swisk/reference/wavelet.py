"""Wavelet KAN in Wav-KAN's formulation, which builds the (batch, out, in) tensor; and Wav-KAN's
layers on it, the oracle for swisk.nn.WaveletKANLinear / WaveletKAN."""
from __future__ import annotations

import math

import torch
from torch import nn


def _mexican_hat(t):
    # Wav-KAN's sign: psi(0) = -2 / (sqrt(3) * pi^(1/4))
    return (2.0 / (math.sqrt(3.0) * math.pi**0.25)) * (t * t - 1.0) * torch.exp(-0.5 * t * t)


def _morlet(t):
    return torch.cos(5.0 * t) * torch.exp(-0.5 * t * t)


def _dog(t):
    return -t * torch.exp(-0.5 * t * t)


def _meyer_nu(u):
    return u**4 * (35.0 - 84.0 * u + 70.0 * u**2 - 20.0 * u**3)


def _meyer(t):
    # 0 from 1 on (sin(pi v) of a huge v would be NaN); a where, not clamp, so a NaN keeps its NaN gradient
    a = t.abs()
    v = torch.where(a > 1.0, torch.ones_like(a), a)
    aux = torch.where(
        v <= 0.5,
        torch.ones_like(v),
        torch.where(v >= 1.0, torch.zeros_like(v), torch.cos(math.pi / 2.0 * _meyer_nu(2.0 * v - 1.0))),
    )
    return torch.sin(math.pi * v) * aux


def _shannon(t):
    # sin(t) / t; near 0 its series, whose autograd derivative is exact there (torch.sinc's backward
    # cancels to 0 at tiny t, where the derivative is -t/3). The series reads t only where it is taken:
    # far out its powers overflow, and the unselected inf would turn the gradient NaN
    near = t.abs() < 0.5
    t2 = torch.where(near, t, torch.zeros_like(t)) ** 2
    series = 1 + t2 * (-1 / 6 + t2 * (1 / 120 + t2 * (-1 / 5040 + t2 * (1 / 362880 + t2 * (-1 / 39916800
                                                                                          + t2 / 6227020800)))))
    return torch.where(near, series, torch.sinc(torch.where(near, torch.ones_like(t), t) / math.pi))


WAVELETS = {
    "mexican_hat": _mexican_hat,
    "morlet": _morlet,
    "dog": _dog,
    "meyer": _meyer,
    "shannon": _shannon,
}


def wavelet(t: torch.Tensor, name: str) -> torch.Tensor:
    """The mother wavelet psi evaluated pointwise."""
    if name not in WAVELETS:
        raise ValueError(f"[wavelet_kan] wavelet: unknown wavelet {name!r}; valid: {', '.join(WAVELETS)}")
    return WAVELETS[name](t)


def wavelet_kan(x, scale, translation, weight, wavelet_name: str) -> torch.Tensor:
    """y[..., o] = sum_i weight[o, i] * psi((x[..., i] - translation[o, i]) / scale[o, i])."""
    t = (x.unsqueeze(-2) - translation) / scale  # (..., out, in)
    return (wavelet(t, wavelet_name) * weight).sum(-1)


def wavkan_transform(x, scale, translation, wavelet_weights, wavelet_name: str) -> torch.Tensor:
    """Wav-KAN's wavelet_transform: the (batch, out, in) psi, windowed over the input index by a
    symmetric Hamming window for shannon (in t's dtype), weighted and summed over the input."""
    t = (x.unsqueeze(-2) - translation) / scale
    psi = wavelet(t, wavelet_name)
    if wavelet_name == "shannon":
        psi = psi * torch.hamming_window(t.shape[-1], periodic=False, dtype=t.dtype, device=t.device)
    return (psi * wavelet_weights).sum(-1)


class WavKANLinearRef(nn.Module):
    """Wav-KAN's KANLinear as the oracle: its parameters in its order (scale, translation, weight1,
    wavelet_weights), its draws (kaiming_uniform_ a=sqrt(5) on wavelet_weights, then on weight1), the
    declared-but-unused SiLU and weight1, and BatchNorm1d on the wavelet output."""

    def __init__(self, in_features, out_features, wavelet_type="mexican_hat"):
        super().__init__()
        self.in_features, self.out_features, self.wavelet_type = in_features, out_features, wavelet_type
        self.scale = nn.Parameter(torch.ones(out_features, in_features))
        self.translation = nn.Parameter(torch.zeros(out_features, in_features))
        self.weight1 = nn.Parameter(torch.empty(out_features, in_features))
        self.wavelet_weights = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.kaiming_uniform_(self.wavelet_weights, a=math.sqrt(5))
        nn.init.kaiming_uniform_(self.weight1, a=math.sqrt(5))
        self.base_activation = nn.SiLU()
        self.bn = nn.BatchNorm1d(out_features)

    def wavelet_transform(self, x):
        return wavkan_transform(x, self.scale, self.translation, self.wavelet_weights, self.wavelet_type)

    def forward(self, x):
        return self.bn(self.wavelet_transform(x))


class WavKANRef(nn.Module):
    """Wav-KAN's KAN: WavKANLinearRef layers in ``layers``, built (and drawn) first to last."""

    def __init__(self, layers_hidden, wavelet_type="mexican_hat"):
        super().__init__()
        self.layers = nn.ModuleList(WavKANLinearRef(i, o, wavelet_type)
                                    for i, o in zip(layers_hidden[:-1], layers_hidden[1:]))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
