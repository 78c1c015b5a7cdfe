"""efficient-kan's import path (``from efficient_kan import KAN, KANLinear``): the same classes as
swisk.nn.KANLinear / KAN, so ``from swisk.compat.efficient_kan import KAN, KANLinear`` is the whole switch.

Same constructor arguments and defaults, parameter and buffer names, random-draw order (the same
torch seed gives the same initial weights), methods and numbers, update_grid included. Deliberate
differences, all additions: inputs of any leading shape in update_grid and b_splines (efficient-kan
asserts 2-d); an optional ``grid`` argument to b_splines and curve2coeff; spline_order 0; bases zero at
±inf instead of NaN; "[KANLinear] arg: ..." errors instead of asserts; an update_grid whose knots would
collapse (grid_eps=0, few distinct x) raises before changing the layer, where efficient-kan has already
replaced the grid when lstsq fails; and update_grid(x, preserve=True), a function-preserving refit.
"""
from ..nn.kan import KAN, KANLinear

__all__ = ["KAN", "KANLinear"]
