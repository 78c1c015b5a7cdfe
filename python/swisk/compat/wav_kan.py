"""Wav-KAN's import path (its KAN.py): ``from swisk.compat.wav_kan import KAN, KANLinear``.

The classes are swisk.nn.WaveletKANLinear and WaveletKAN themselves: Wav-KAN's constructors
(``KANLinear(in_features, out_features, wavelet_type='mexican_hat')``,
``KAN(layers_hidden, wavelet_type='mexican_hat')``), parameters and buffers, init draw order,
``wavelet_transform`` and forward, on the fused ``swisk.ops.wavelet_kan``."""
from ..nn.wavelet import WaveletKAN as KAN
from ..nn.wavelet import WaveletKANLinear as KANLinear

__all__ = ["KAN", "KANLinear"]
