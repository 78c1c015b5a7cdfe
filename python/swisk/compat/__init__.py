"""Import paths of the libraries swisk replaces: switching is one import line."""
