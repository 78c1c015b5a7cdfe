"""Import paths of the libraries swisk replaces: switching is one import line."""
from . import efficient_kan, panther, torch_conv_kan, wav_kan  # noqa: F401
