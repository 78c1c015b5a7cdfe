"""Wav-KAN's layers on the fused wavelet op: its names, parameters, init draws and numbers, so its
checkpoints load both ways (swisk.compat.wav_kan exports these classes as KANLinear and KAN)."""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .. import ops
from ..reference import WAVELETS
from ._checks import LAYER_RAISES_DOC, callable_arg, check_input, flag_arg, int_arg, widths_arg


def _check_args(layer, wavelet_type, batch_norm, base_activation):
    """The constructor arguments WaveletKANLinear and WaveletKAN share, checked in the caller's name."""
    if not isinstance(wavelet_type, str):
        raise TypeError(f"[{layer}] wavelet_type: expected a str, got {type(wavelet_type).__name__}")
    if wavelet_type not in WAVELETS:
        raise ValueError(f"[{layer}] wavelet_type: unknown wavelet {wavelet_type!r}; valid: {', '.join(WAVELETS)}")
    return wavelet_type, flag_arg(layer, "batch_norm", batch_norm), callable_arg(layer, "base_activation",
                                                                                 base_activation)


class WaveletKANLinear(nn.Module):
    __doc__ = """Wav-KAN's KANLinear: y = bn(wavelet_transform(x)), where
    wavelet_transform(x)[o] = sum_i wavelet_weights[o, i] psi((x_i - translation[o, i]) / scale[o, i]).

    Wav-KAN's surface: parameters ``scale`` (ones), ``translation`` (zeros), ``weight1`` and
    ``wavelet_weights`` (both kaiming uniform, a = sqrt(5), drawn wavelet_weights first), all
    (out_features, in_features), then ``bn = BatchNorm1d(out_features)``; ``base_activation`` is
    ``nn.SiLU()``. So the same torch seed gives the same weights and Wav-KAN's state_dicts load both ways.
    For ``shannon`` psi is windowed by ``torch.hamming_window(in_features, periodic=False)`` over i.

    Like Wav-KAN's forward, the base branch is off: ``weight1`` is declared, drawn and saved but unused
    (its grad stays None). Passing ``base_activation`` (a callable, e.g. ``nn.SiLU()``) turns it on:
    ``F.linear(base_activation(x), weight1)`` is added before the norm, the Spl-KAN variant Wav-KAN's
    comments suggest. ``batch_norm=False`` drops ``bn``. Extensions beyond Wav-KAN: x may have any
    leading batch dimensions (flattened for the norm); an unknown wavelet raises here, not in forward.

    Args:
        in_features, out_features: the widths.
        wavelet_type: "mexican_hat", "morlet", "dog", "meyer" or "shannon".
        batch_norm: whether the output goes through BatchNorm1d.
        base_activation: None (Wav-KAN's forward) or a callable turning the base branch on.

""" + LAYER_RAISES_DOC

    def __init__(self, in_features: int, out_features: int, wavelet_type: str = "mexican_hat",
                 batch_norm: bool = True, base_activation: Optional[Callable] = None):
        super().__init__()
        wavelet_type, batch_norm, base_activation = _check_args("WaveletKANLinear", wavelet_type, batch_norm,
                                                                base_activation)
        in_features = int_arg("WaveletKANLinear", "in_features", in_features, 1)
        out_features = int_arg("WaveletKANLinear", "out_features", out_features, 1)
        self.in_features, self.out_features, self.wavelet_type = in_features, out_features, wavelet_type
        # Wav-KAN's registration order (state_dict keys) and draw order (wavelet_weights, then weight1)
        self.scale = nn.Parameter(torch.ones(out_features, in_features))
        self.translation = nn.Parameter(torch.zeros(out_features, in_features))
        self.weight1 = nn.Parameter(torch.empty(out_features, in_features))
        self.wavelet_weights = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.kaiming_uniform_(self.wavelet_weights, a=math.sqrt(5))
        nn.init.kaiming_uniform_(self.weight1, a=math.sqrt(5))
        self.base_branch = base_activation is not None
        self.base_activation = base_activation if self.base_branch else nn.SiLU()
        self.bn = nn.BatchNorm1d(out_features) if batch_norm else None

    def effective_weight(self) -> torch.Tensor:
        """The weight the op sees: wavelet_weights, windowed for shannon (the window in the weight's
        precision, as Wav-KAN computes it in its input's)."""
        w = self.wavelet_weights
        if self.wavelet_type != "shannon":
            return w
        wdt = w.dtype if w.dtype in (torch.float32, torch.float64) else torch.float32
        return w * torch.hamming_window(self.in_features, periodic=False, dtype=wdt, device=w.device).to(w.dtype)

    def wavelet_transform(self, x: torch.Tensor) -> torch.Tensor:
        """Wav-KAN's wavelet_transform: the wavelet sum before the norm, (..., out_features), on the
        fused op (never the (batch, out, in) tensor)."""
        check_input("WaveletKANLinear", x, self.in_features, self.wavelet_weights)
        return ops.wavelet_kan(x, self.scale, self.translation, self.effective_weight(), self.wavelet_type)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.wavelet_transform(x)
        if self.base_branch:
            y = y + F.linear(self.base_activation(x), self.weight1)
        if self.bn is not None:
            y = self.bn(y.reshape(-1, self.out_features)).reshape(y.shape)
        return y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"wavelet_type={self.wavelet_type!r}, batch_norm={self.bn is not None}, base_branch={self.base_branch}")


class WaveletKAN(nn.Module):
    __doc__ = """Wav-KAN's KAN: WaveletKANLinear layers in ``self.layers``, built (and drawn) first to last, so the
    state_dict keys and, for one torch seed, the initial weights match Wav-KAN's layer after layer.

    Args:
        layers_hidden: the widths, at least two.
        wavelet_type, batch_norm, base_activation: as WaveletKANLinear's, for every layer.

""" + LAYER_RAISES_DOC

    def __init__(self, layers_hidden: Sequence[int], wavelet_type: str = "mexican_hat", batch_norm: bool = True,
                 base_activation: Optional[Callable] = None):
        super().__init__()
        widths = widths_arg("WaveletKAN", "layers_hidden", layers_hidden)
        wavelet_type, batch_norm, base_activation = _check_args("WaveletKAN", wavelet_type, batch_norm,
                                                                base_activation)
        self.layers = nn.ModuleList(
            WaveletKANLinear(i, o, wavelet_type, batch_norm, base_activation) for i, o in zip(widths, widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
