"""Wav-KAN's layers on the fused wavelet op: the same parameter names, so Wav-KAN's weights load."""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .. import ops
from ..reference import WAVELETS
from ._checks import callable_arg, check_input, flag_arg, int_arg, widths_arg


def _check_args(layer, wavelet_type, batch_norm, base_activation):
    """The constructor arguments WaveletKANLinear and WaveletKAN share, checked in the caller's name."""
    if not isinstance(wavelet_type, str):
        raise TypeError(f"[{layer}] wavelet_type: expected a str, got {type(wavelet_type).__name__}")
    if wavelet_type not in WAVELETS:
        raise ValueError(f"[{layer}] wavelet_type: unknown wavelet {wavelet_type!r}; valid: {', '.join(WAVELETS)}")
    return wavelet_type, flag_arg(layer, "batch_norm", batch_norm), callable_arg(layer, "base_activation",
                                                                                 base_activation)


class WaveletKANLinear(nn.Module):
    """Wav-KAN's KANLinear: y = BN(sum_i wavelet_weights[o, i] psi((x_i - translation[o, i]) / scale[o, i])).

    Parameters as Wav-KAN names them: ``scale`` (ones), ``translation`` (zeros) and
    ``wavelet_weights`` (kaiming uniform, a = sqrt(5)), all (out_features, in_features), and with
    ``batch_norm=True`` a ``BatchNorm1d(out_features)`` named ``bn``. For ``shannon`` the weights are
    multiplied by ``torch.hamming_window(in_features, periodic=False)``, as Wav-KAN windows its sinc.

    ``base_activation`` (e.g. ``nn.SiLU()``) adds the branch ``F.linear(base_activation(x), base_weight)``
    before the norm. Wav-KAN declares that weight (as ``weight1``) but never adds the branch, so it is
    off by default; loading a Wav-KAN state_dict maps ``weight1`` to ``base_weight`` when the branch is
    on, and drops it (as Wav-KAN ignores it) when it is off.

    x may have any leading batch dimensions; with ``batch_norm`` they are flattened for the norm
    (Wav-KAN itself takes (batch, in_features) only).
    """

    def __init__(self, in_features: int, out_features: int, wavelet_type: str = "mexican_hat",
                 batch_norm: bool = True, base_activation: Optional[Callable] = None):
        super().__init__()
        wavelet_type, batch_norm, base_activation = _check_args("WaveletKANLinear", wavelet_type, batch_norm,
                                                                base_activation)
        in_features = int_arg("WaveletKANLinear", "in_features", in_features, 1)
        out_features = int_arg("WaveletKANLinear", "out_features", out_features, 1)
        self.in_features, self.out_features, self.wavelet_type = in_features, out_features, wavelet_type
        self.scale = nn.Parameter(torch.ones(out_features, in_features))
        self.translation = nn.Parameter(torch.zeros(out_features, in_features))
        self.wavelet_weights = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.kaiming_uniform_(self.wavelet_weights, a=math.sqrt(5))
        self.base_activation = base_activation
        if base_activation is not None:
            self.base_weight = nn.Parameter(torch.empty(out_features, in_features))
            nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5))
        else:
            self.register_parameter("base_weight", None)
        self.bn = nn.BatchNorm1d(out_features) if batch_norm else None
        self.register_load_state_dict_pre_hook(WaveletKANLinear._map_wavkan_keys)

    @staticmethod
    def _map_wavkan_keys(module, state_dict, prefix, *args):
        w = state_dict.pop(prefix + "weight1", None)
        if w is not None and module.base_weight is not None and prefix + "base_weight" not in state_dict:
            state_dict[prefix + "base_weight"] = w

    def effective_weight(self) -> torch.Tensor:
        """The weight the op sees: wavelet_weights, windowed for shannon (the window in the weight's
        precision, as Wav-KAN computes it in its input's)."""
        w = self.wavelet_weights
        if self.wavelet_type != "shannon":
            return w
        wdt = w.dtype if w.dtype in (torch.float32, torch.float64) else torch.float32
        return w * torch.hamming_window(self.in_features, periodic=False, dtype=wdt, device=w.device).to(w.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input("WaveletKANLinear", x, self.in_features, self.wavelet_weights)
        y = ops.wavelet_kan(x, self.scale, self.translation, self.effective_weight(), self.wavelet_type)
        if self.base_weight is not None:
            y = y + F.linear(self.base_activation(x), self.base_weight)
        if self.bn is not None:
            y = self.bn(y.reshape(-1, self.out_features)).reshape(y.shape)
        return y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"wavelet_type={self.wavelet_type!r}, batch_norm={self.bn is not None}")


class WaveletKAN(nn.Module):
    """Wav-KAN's KAN: WaveletKANLinear layers in ``self.layers`` (so its state_dict keys match)."""

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
