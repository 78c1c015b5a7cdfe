"""Panther's import path for its sketched linear layer: ``from swisk.compat.panther import SKLinear``
(Panther's ``panther.nn.SKLinear``): the same constructor, names, initialisation and numbers, plus an
optional ``seed=`` that regenerates U1s/U2s instead of storing them."""
from ..nn.sketched import SKLinear

__all__ = ["SKLinear"]
