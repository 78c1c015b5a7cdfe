"""The public ops (torch.ops.swisk.* underneath, with Python-level argument checks)."""
from ._ops.conv import kan_conv1d, kan_conv2d, kan_conv3d
from ._ops.sketched import sketched_conv2d, sketched_linear, srht_sketched_linear, srht_sketched_operators
from ._ops.spline import basis as bspline_basis
from ._ops.spline import expand as kan_expand
from ._ops.spline import kan_linear
from ._ops.wavelet import kan as wavelet_kan
from ._ops.sketch import (fwht, gaussian_sketch, rademacher_sketch, sketch, sketch_matrix,  # noqa: F401
                          sparse_sign_sketch, srht)

__all__ = ["bspline_basis", "kan_expand", "kan_linear", "wavelet_kan", "kan_conv1d", "kan_conv2d", "kan_conv3d",
           "sketched_linear", "sketched_conv2d", "srht_sketched_linear", "srht_sketched_operators", "fwht", "srht", "sketch", "sketch_matrix", "gaussian_sketch",
           "rademacher_sketch", "sparse_sign_sketch"]
