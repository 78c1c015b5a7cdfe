"""B-spline bases and the KAN linear layer, in efficient-kan's formulation."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def bspline_basis(x: torch.Tensor, grid: torch.Tensor, spline_order: int) -> torch.Tensor:
    """(..., in) -> (..., in, n_knots - 1 - spline_order) by the Cox–de Boor recursion.

    Half-open knot intervals; zero outside [grid[:, 0], grid[:, -1]) (±inf included, rather than
    the inf·0 = NaN the bare recursion gives); a NaN input gives NaN in every basis.
    """
    xe = x.unsqueeze(-1)
    g = grid
    bases = ((xe >= g[:, :-1]) & (xe < g[:, 1:])).to(x.dtype)
    for k in range(1, spline_order + 1):
        left = (xe - g[:, : -(k + 1)]) / (g[:, k:-1] - g[:, : -(k + 1)])
        right = (g[:, k + 1 :] - xe) / (g[:, k + 1 :] - g[:, 1:-k])
        bases = left * bases[..., :-1] + right * bases[..., 1:]
    bases = torch.where(torch.isinf(xe), torch.zeros_like(bases), bases)
    return torch.where(torch.isnan(xe), torch.full_like(bases, float("nan")), bases)


def kan_linear(
    x: torch.Tensor,
    grid: torch.Tensor,
    base_weight: torch.Tensor,
    spline_weight: torch.Tensor,
    spline_scaler: torch.Tensor | None,
    spline_order: int,
    base_activation=F.silu,
) -> torch.Tensor:
    """y = act(x) @ base_weightᵀ + basis(x) · (spline_weight · spline_scaler): efficient-kan's forward,
    which builds the (batch, in, n_basis) basis tensor."""
    in_features, out_features = base_weight.shape[1], base_weight.shape[0]
    lead = x.shape[:-1]
    x2 = x.reshape(-1, in_features)
    base = F.linear(base_activation(x2), base_weight)
    w = spline_weight if spline_scaler is None else spline_weight * spline_scaler.unsqueeze(-1)
    basis = bspline_basis(x2, grid, spline_order)
    spline = F.linear(basis.reshape(x2.shape[0], -1), w.reshape(out_features, -1))
    return (base + spline).reshape(*lead, out_features)
