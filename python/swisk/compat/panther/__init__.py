"""Panther's import paths: ``from swisk.compat.panther import SKLinear, SKConv2d`` (``panther.nn``'s layers:
the same constructor, names, initialisation and numbers, plus an optional ``seed=`` that regenerates
U1s/U2s instead of storing them, and ``operator="srht"`` for seeded Hadamard operators) and
``swisk.compat.panther.sketch`` (its sketching operators, seeded)."""
from ...nn.sketched import SKConv2d, SKLinear
from . import sketch  # noqa: F401

__all__ = ["SKConv2d", "SKLinear", "sketch"]
