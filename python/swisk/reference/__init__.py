"""Pure-torch formulations of every swisk op, written for clarity: the tests' oracle and the
benchmark's baseline. They materialise the intermediate tensors the fused kernels avoid."""
from .spline import (KAN, KANLinear, bspline_basis, curve2coeff, kan_contract, kan_expand, kan_grid, kan_linear,
                     kan_regularization_loss, kan_update_grid, silu_derivative)
from .conv import kan_conv
from .sketched import sketched_conv2d, sketched_linear, srht_sketched_linear
from . import torch_conv_kan
from .torch_conv_kan import KANConv1DLayer, KANConv2DLayer, KANConv3DLayer
from .wavelet import WAVELETS, wavelet, wavelet_kan
from . import sketch  # noqa: F401  (the module: sketch.sketch_matrix, sketch.sketch, ...)

__all__ = ["bspline_basis", "kan_expand", "kan_contract", "silu_derivative", "kan_linear", "kan_grid", "curve2coeff", "kan_update_grid", "kan_regularization_loss",
           "KANLinear", "KAN", "kan_conv", "sketched_linear", "sketched_conv2d", "srht_sketched_linear", "torch_conv_kan",
           "KANConv1DLayer", "KANConv2DLayer", "KANConv3DLayer", "wavelet", "wavelet_kan", "WAVELETS", "sketch"]
