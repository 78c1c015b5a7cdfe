"""The public ops (torch.ops.swisk.* underneath, with Python-level argument checks)."""
from ._ops.spline import basis as bspline_basis
from ._ops.spline import kan_linear

__all__ = ["bspline_basis", "kan_linear"]
