"""Drop-in layers built on the swisk ops."""
from .kan import KAN, KANLinear

__all__: list = ["KAN", "KANLinear"]
