"""Argument checks shared by the layers. Errors read "[Layer] arg: message" and name the layer's own
argument, not the op's internal tensors. The forward checks touch only Python attributes (shape, dtype,
device), never tensor data, so they cost nothing on a GPU and trace cleanly under torch.compile."""
from __future__ import annotations

import math
import numbers

import torch

from .._backend import autocast_enabled

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
DEVICE_TYPES = ("cpu", "cuda", "mps")


# Docstring pieces the layers share: the spline layers' constructor arguments (KANLinear, KAN,
# KANConv1d/2d/3d) and every layer's errors.
SPLINE_ARGS_DOC = """        grid_size: intervals of the uniform knot grid over grid_range.
        spline_order: the splines' degree k (any k >= 0).
        scale_noise, scale_base, scale_spline: efficient-kan's initialisation scales.
        base_activation: a module class (SiLU: one fused op; another runs the base branch in torch).
        grid_eps: update_grid's blend of quantile and uniform knots.
        grid_range: [low, high] of the initial knots.
"""
LAYER_RAISES_DOC = """    Raises:
        TypeError / ValueError naming the layer and the argument, here for bad constructor arguments and
        in forward for an input of the wrong type, dtype, device or width.
"""


def int_arg(layer: str, arg: str, v, minimum: int, maximum: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"[{layer}] {arg}: expected an int, got {type(v).__name__}")
    if v < minimum or (maximum is not None and v > maximum):
        bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise ValueError(f"[{layer}] {arg}: must be {bound}, got {v}")
    return int(v)


def real_arg(layer: str, arg: str, v, lo: float | None = None, hi: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"[{layer}] {arg}: expected a real number, got {type(v).__name__}")
    if not math.isfinite(v):
        raise ValueError(f"[{layer}] {arg}: must be finite, got {v}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        bound = f">= {lo}" if hi is None else f"<= {hi}" if lo is None else f"in [{lo}, {hi}]"
        raise ValueError(f"[{layer}] {arg}: must be {bound}, got {v}")
    return v


def flag_arg(layer: str, arg: str, v) -> bool:
    if not isinstance(v, bool) and not (isinstance(v, numbers.Integral) and v in (0, 1)):
        raise TypeError(f"[{layer}] {arg}: expected a bool, got {type(v).__name__}")
    return bool(v)


def widths_arg(layer: str, arg: str, v) -> list:
    """layers_hidden: [in, hidden..., out], at least two positive widths (one width is no layer)."""
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or not hasattr(v, "__iter__"):
        raise TypeError(f"[{layer}] {arg}: expected a sequence of ints, got {type(v).__name__}")
    if len(v) < 2:
        raise ValueError(f"[{layer}] {arg}: needs at least two widths [in, ..., out], got {list(v)}")
    return [int_arg(layer, f"{arg}[{i}]", w, 1) for i, w in enumerate(v)]


def range_arg(layer: str, arg: str, v) -> tuple:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) != 2:
        raise TypeError(f"[{layer}] {arg}: expected a pair [low, high], got {v!r}")
    lo, hi = (real_arg(layer, arg, t) for t in v)
    if not lo < hi:
        raise ValueError(f"[{layer}] {arg}: must be increasing (low < high), got {list(v)}")
    return lo, hi


def module_class_arg(layer: str, arg: str, v):
    """efficient-kan takes the activation's class and instantiates it (torch.nn.SiLU, not SiLU())."""
    if not isinstance(v, type):
        hint = " (pass the class, e.g. torch.nn.SiLU, not an instance)" if isinstance(v, torch.nn.Module) else ""
        raise TypeError(f"[{layer}] {arg}: expected a class to instantiate, got {type(v).__name__}{hint}")
    return v


def callable_arg(layer: str, arg: str, v):
    """Wav-KAN-style activation: None or a callable applied to x (nn.SiLU(), F.silu)."""
    if v is None:
        return v
    if isinstance(v, type) or not callable(v):
        hint = f" (pass an instance, e.g. {v.__name__}())" if isinstance(v, type) else ""
        raise TypeError(f"[{layer}] {arg}: expected None or a callable, got {type(v).__name__}{hint}")
    return v


def check_input(layer: str, x, in_features: int, param: torch.Tensor) -> None:
    """x (..., in_features) on the layer's device, in a dtype the ops run (the layer's, or any float
    under autocast, which casts for the ops). param stands for the layer's parameters."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"[{layer}] input: expected a torch.Tensor, got {type(x).__name__}")
    if param.device.type not in DEVICE_TYPES and not param.is_meta:  # meta: shapes only
        raise ValueError(f"[{layer}] device: swisk runs on {', '.join(DEVICE_TYPES)}, "
                         f"but the layer is on {param.device}")
    if param.dtype not in FLOAT_DTYPES:
        raise TypeError(f"[{layer}] dtype: the layer's parameters are {param.dtype}; swisk supports "
                        f"{', '.join(str(d) for d in FLOAT_DTYPES)}")
    if x.device != param.device:
        raise ValueError(f"[{layer}] input: on device {x.device}, but the layer is on {param.device}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"[{layer}] input: dtype {x.dtype} is not supported; expected one of "
                        f"{', '.join(str(d) for d in FLOAT_DTYPES)}")
    if x.dtype != param.dtype and not autocast_enabled(x.device.type):
        raise TypeError(f"[{layer}] input: dtype {x.dtype} differs from the layer's {param.dtype} "
                        f"(cast one of them, or run under torch.autocast)")
    if x.dim() == 0 or x.shape[-1] != in_features:
        got = "a 0-d tensor" if x.dim() == 0 else f"{x.shape[-1]} (shape {tuple(x.shape)})"
        raise ValueError(f"[{layer}] input: expected last dimension in_features={in_features}, got {got}")
