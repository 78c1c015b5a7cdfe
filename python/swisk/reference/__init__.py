"""Pure-torch formulations of every swisk op, written for clarity: the tests' oracle and the
benchmark's baseline. They materialise the intermediate tensors the fused kernels avoid."""
from .spline import bspline_basis, kan_linear
from .wavelet import WAVELETS, wavelet, wavelet_kan

__all__ = ["bspline_basis", "kan_linear", "wavelet", "wavelet_kan", "WAVELETS"]
