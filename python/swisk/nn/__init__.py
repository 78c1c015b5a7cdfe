"""Drop-in layers built on the swisk ops."""
__all__: list = []
