"""Panther's import paths: ``from swisk.compat.panther import SKLinear`` (Panther's ``panther.nn.SKLinear``:
the same constructor, names, initialisation and numbers, plus an optional ``seed=`` that regenerates
U1s/U2s instead of storing them) and ``swisk.compat.panther.sketch`` (its sketching operators, seeded)."""
from ...nn.sketched import SKLinear
from . import sketch  # noqa: F401

__all__ = ["SKLinear", "sketch"]
