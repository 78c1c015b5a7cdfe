"""torch.library registrations of every swisk kernel (namespace swisk), one module per family."""
from . import spline  # noqa: F401
from . import wavelet  # noqa: F401
from . import conv  # noqa: F401
from . import sketch  # noqa: F401
