"""efficient-kan's import path (``from efficient_kan import KAN, KANLinear``): the same classes as
swisk.nn.KANLinear / KAN, so ``from swisk.compat.efficient_kan import KAN, KANLinear`` is the whole switch.

Same constructor arguments and defaults, parameter and buffer names, random-draw order (the same
torch seed gives the same initial weights), methods and numbers, update_grid included. Deliberate
differences: inputs of any leading shape in update_grid and b_splines (efficient-kan asserts 2-d),
spline_order 0 allowed, bases zero at ±inf instead of NaN, clear errors instead of asserts (and instead
of silently non-finite weights when update_grid's knots collapse), and update_grid(x, preserve=True).
"""
from ..nn.kan import KAN, KANLinear

__all__ = ["KAN", "KANLinear"]
