"""torch.library registrations of every swisk kernel (namespace swisk), one module per family."""
from . import spline  # noqa: F401
from . import wavelet  # noqa: F401
from . import conv  # noqa: F401
from . import sketch  # noqa: F401
from . import flops  # noqa: F401  (FlopCounterMode formulas of the ops above)
from .define import tag_compile_caches

tag_compile_caches()
