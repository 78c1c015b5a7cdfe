"""The public ops (torch.ops.swisk.* underneath, with Python-level argument checks)."""
from ._ops.spline import basis as bspline_basis
from ._ops.wavelet import kan as wavelet_kan

__all__ = ["bspline_basis", "wavelet_kan"]
