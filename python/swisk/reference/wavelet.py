"""Wavelet KAN in Wav-KAN's formulation, which builds the (batch, out, in) tensor."""
from __future__ import annotations

import math

import torch


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
    v = t.abs()
    aux = torch.where(
        v <= 0.5,
        torch.ones_like(v),
        torch.where(v >= 1.0, torch.zeros_like(v), torch.cos(math.pi / 2.0 * _meyer_nu(2.0 * v - 1.0))),
    )
    return torch.sin(math.pi * v) * aux


def _shannon(t):
    return torch.sinc(t / math.pi)  # sin(t) / t


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
