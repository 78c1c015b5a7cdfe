"""Drop-in layers built on the swisk ops."""
from .kan import KAN, KANLinear
from .wavelet import WaveletKAN, WaveletKANLinear

__all__: list = ["KAN", "KANLinear", "WaveletKAN", "WaveletKANLinear"]
