"""FLOP formulas of swisk's ops for torch.utils.flop_counter.FlopCounterMode (and what builds on it):
2 x the multiply-adds of each op's dense-equivalent contractions, as the bench counts them. Operand
generators (bspline_basis, kan_expand, kan_contract, sketch_matrix) count nothing, as torch's
elementwise ops count nothing. Tensor arguments arrive as shapes (None stays None)."""
from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import register_flop_formula

_ops = torch.ops.swisk


def _rows(shape) -> int:
    return math.prod(shape[:-1])


def _kan_linear_flops(x, base_weight, spline_weight) -> int:
    out, fin, n_basis = spline_weight
    return 2 * _rows(x) * out * fin * (n_basis + (base_weight is not None))


@register_flop_formula(_ops.kan_linear)
def _kan_linear(x, grid, base_weight, spline_weight, *args, out_shape=None, **kwargs) -> int:
    return _kan_linear_flops(x, base_weight, spline_weight)


@register_flop_formula(_ops.kan_linear_backward)
def _kan_linear_backward(x, grid, base_weight, spline_weight, spline_scaler, grad_out, spline_order, need_x=True,
                         need_weights=True, *args, out_shape=None, **kwargs) -> int:
    return (bool(need_x) + bool(need_weights)) * _kan_linear_flops(x, base_weight, spline_weight)


@register_flop_formula(_ops.wavelet_kan)
def _wavelet_kan(x, scale, translation, weight, *args, out_shape=None, **kwargs) -> int:
    return 2 * _rows(x) * math.prod(weight)


@register_flop_formula(_ops.wavelet_kan_backward)
def _wavelet_kan_backward(x, scale, translation, weight, *args, out_shape=None, **kwargs) -> int:
    return 4 * _rows(x) * math.prod(weight)


def _kan_conv_flops(out_shape, base_weight, spline_weight) -> int:
    per_output = math.prod(spline_weight[1:]) + (math.prod(base_weight[1:]) if base_weight is not None else 0)
    return 2 * math.prod(out_shape) * per_output


@register_flop_formula(_ops.kan_conv)
def _kan_conv(x, grid, base_weight, spline_weight, *args, out_shape=None, **kwargs) -> int:
    return _kan_conv_flops(out_shape, base_weight, spline_weight)


@register_flop_formula(_ops.kan_conv_backward)
def _kan_conv_backward(x, grid, base_weight, spline_weight, spline_scaler, grad_out, *args, out_shape=None,
                       **kwargs) -> int:
    grad_x = args[-1] if args else kwargs.get("grad_x", True)
    return (2 if grad_x else 1) * _kan_conv_flops(grad_out, base_weight, spline_weight)


@register_flop_formula([_ops.sketch, _ops.sketch_transpose])
def _sketch(x, kind, size, *args, out_shape=None, **kwargs) -> int:
    return 2 * _rows(x) * x[-1] * size  # (rows, n) x (n, k), or (rows, k) x (k, n)


@register_flop_formula(_ops.fwht)
def _fwht(x, *args, out_shape=None, **kwargs) -> int:
    n = x[-1]
    return _rows(x) * n * max(0, n.bit_length() - 1)  # n log2 n additions per row


def _srht_flops(rows: int, n: int) -> int:
    big = 1 << max(0, n - 1).bit_length()  # n rounded up to a power of two
    return rows * big * max(0, big.bit_length() - 1)


@register_flop_formula(_ops.srht)
def _srht(x, k, *args, out_shape=None, **kwargs) -> int:
    return _srht_flops(_rows(x), x[-1])


@register_flop_formula(_ops.srht_transpose)
def _srht_transpose(grad, n, *args, out_shape=None, **kwargs) -> int:
    return _srht_flops(_rows(grad), n)
