"""The public ops (torch.ops.swisk.* underneath, with Python-level argument checks)."""
from ._ops.spline import basis as bspline_basis

__all__ = ["bspline_basis"]
