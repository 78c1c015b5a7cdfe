"""Drop-in layers built on the swisk ops."""
from .conv import KANConv1d, KANConv2d, KANConv3d
from .kan import KAN, KANLinear
from .sketched import SKConv2d, SKLinear
from .wavelet import WaveletKAN, WaveletKANLinear

__all__: list = ["KAN", "KANLinear", "KANConv1d", "KANConv2d", "KANConv3d", "SKConv2d", "SKLinear", "WaveletKAN",
                 "WaveletKANLinear"]
