"""Drop-in layers built on the swisk ops."""
from .wavelet import WaveletKAN, WaveletKANLinear

__all__: list = ["WaveletKAN", "WaveletKANLinear"]
