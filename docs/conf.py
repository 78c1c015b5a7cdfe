"""Sphinx configuration: the API reference from swisk's docstrings (Google style, napoleon)."""
import swisk

project = "swisk"
release = version = swisk.__version__
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_typehints = "none"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
html_theme = "alabaster"
exclude_patterns = ["_build"]
