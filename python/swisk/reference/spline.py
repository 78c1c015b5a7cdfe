"""B-spline bases and the KAN linear layer, in efficient-kan's formulation."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def bspline_basis(x: torch.Tensor, grid: torch.Tensor, spline_order: int, derivative: int = 0) -> torch.Tensor:
    """(..., in) -> (..., in, n_knots - 1 - spline_order) by the Cox–de Boor recursion; with derivative
    m > 0, the m-th derivative in x (the top m levels take derivative steps; zero past spline_order).

    Half-open knot intervals; zero outside [grid[:, 0], grid[:, -1]) (±inf and huge |x| included, rather
    than the inf·0 = NaN the bare recursion gives when x - knot overflows); a NaN input gives NaN in
    every basis.
    """
    xe = x.unsqueeze(-1)
    g = grid
    bases = ((xe >= g[:, :-1]) & (xe < g[:, 1:])).to(x.dtype)
    for k in range(1, spline_order + 1):
        lo, hi = g[:, k:-1] - g[:, : -(k + 1)], g[:, k + 1 :] - g[:, 1:-k]
        if k > spline_order - derivative:
            bases = k * (bases[..., :-1] / lo - bases[..., 1:] / hi)
        else:
            bases = (xe - g[:, : -(k + 1)]) / lo * bases[..., :-1] + (g[:, k + 1 :] - xe) / hi * bases[..., 1:]
    if derivative > spline_order:
        bases = torch.zeros_like(bases)
    bases = torch.where((xe < g[:, :1]) | (xe > g[:, -1:]), torch.zeros_like(bases), bases)
    return torch.where(torch.isnan(xe), torch.full_like(bases, float("nan")), bases)


def silu_derivative(x: torch.Tensor, derivative: int = 0) -> torch.Tensor:
    """The m-th derivative of silu(x) = x·σ(x): x·σ^(m) + m·σ^(m-1), with σ^(j) a homogeneous polynomial of
    degree j + 1 in s = σ(x) and t = σ(-x) = 1 - s (σ' = s·t, t' = -s·t): no large terms cancel for
    |x| large, where a polynomial in s alone loses every digit in fp32 past the third order."""
    if derivative == 0:
        return F.silu(x)
    s, t = torch.sigmoid(x), torch.sigmoid(-x)
    if derivative == 1:
        return s * (1 + x * t)
    coefs = [0.0, 1.0]  # σ = s; (s^a t^b)' = a·s^a t^(b+1) - b·s^(a+1) t^b
    values = []
    for j in range(derivative + 1):
        values.append(sum(c * s ** a * t ** (j + 1 - a) for a, c in enumerate(coefs) if c))
        coefs = [a * c - (j + 2 - a) * (coefs[a - 1] if a else 0.0) for a, c in enumerate(coefs + [0.0])]
    return x * values[derivative] + derivative * values[derivative - 1]


def kan_expand(x: torch.Tensor, grid: torch.Tensor, spline_order: int, derivative: int = 0,
               base: bool = True) -> torch.Tensor:
    """(..., in) -> (..., base·in + in·n_basis): [silu^(m)(x) | B^(m)(x) flattened per feature], the
    A-operand of the KAN linear GEMM (efficient-kan's cat of silu(x) and its bases)."""
    b = bspline_basis(x, grid, spline_order, derivative).flatten(-2)
    return torch.cat([silu_derivative(x, derivative), b], -1) if base else b


def kan_contract(x: torch.Tensor, grid: torch.Tensor, grad: torch.Tensor, spline_order: int, derivative: int = 1,
                 base: bool = True) -> torch.Tensor:
    """(..., in): per feature i, the sum of grad's columns of feature i times kan_expand(x, ..., derivative)
    (the backward of kan_expand of order derivative - 1)."""
    in_f = x.shape[-1]
    b = bspline_basis(x, grid, spline_order, derivative)
    gb = grad[..., in_f:] if base else grad
    out = (gb.reshape(b.shape) * b).sum(-1)
    return out + grad[..., :in_f] * silu_derivative(x, derivative) if base else out


def kan_linear(
    x: torch.Tensor,
    grid: torch.Tensor,
    base_weight: torch.Tensor | None,
    spline_weight: torch.Tensor,
    spline_scaler: torch.Tensor | None,
    spline_order: int,
    base_activation=F.silu,
) -> torch.Tensor:
    """y = act(x) @ base_weightᵀ + basis(x) · (spline_weight · spline_scaler): efficient-kan's forward,
    which builds the (batch, in, n_basis) basis tensor. base_weight None: no base branch at all (not a
    zero weight, whose 0·act(±inf) would be NaN)."""
    out_features, in_features = spline_weight.shape[:2]
    lead = x.shape[:-1]
    x2 = x.reshape(lead.numel(), in_features)  # explicit sizes: any of them may be 0
    w = spline_weight if spline_scaler is None else spline_weight * spline_scaler.unsqueeze(-1)
    basis = bspline_basis(x2, grid, spline_order)
    width = in_features * spline_weight.shape[2]
    y = F.linear(basis.reshape(x2.shape[0], width), w.reshape(out_features, width))
    if base_weight is not None:
        y = F.linear(base_activation(x2), base_weight) + y
    return y.reshape(*lead, out_features)


# ---- efficient-kan's layer around the op: knots, initialisation, grid update, regulariser ----

def kan_grid(in_features: int, grid_size: int, spline_order: int, grid_range=(-1.0, 1.0)) -> torch.Tensor:
    """(in, grid_size + 2·spline_order + 1): uniform knots on grid_range, spline_order more each side."""
    lo, hi = grid_range
    h = (hi - lo) / grid_size
    return (torch.arange(-spline_order, grid_size + spline_order + 1) * h + lo).expand(in_features, -1).contiguous()


def curve2coeff(x: torch.Tensor, y: torch.Tensor, grid: torch.Tensor, spline_order: int) -> torch.Tensor:
    """Least-squares spline coefficients (out, in, n_basis) of per-feature curves y (batch, in, out) at
    x (batch, in): one lstsq per input feature on its own knots."""
    a = bspline_basis(x, grid, spline_order).transpose(0, 1)  # (in, batch, n_basis)
    return torch.linalg.lstsq(a, y.transpose(0, 1)).solution.permute(2, 0, 1).contiguous()


@torch.no_grad()
def kan_update_grid(x, grid, spline_weight, spline_scaler, spline_order, grid_eps, margin=0.01, preserve=False):
    """efficient-kan's update_grid on x (batch, in): returns (new grid, new spline_weight).

    Knots: per feature, grid_eps·(uniform knots over [min - margin, max + margin]) + (1 - grid_eps)·(the
    sorted samples at g + 1 evenly spaced ranks), extended by spline_order uniform steps each side. Weights:
    the lstsq fit, on the new knots, of each feature's current spline curve (scaler applied). efficient-kan
    stores that fit as is, so forward applies spline_scaler once more; preserve=True divides by the scaler
    (0 where it is 0), which keeps the layer's function up to the fit."""
    k, g = spline_order, grid.shape[1] - 2 * spline_order - 1
    n = x.shape[0]
    w = spline_weight if spline_scaler is None else spline_weight * spline_scaler.unsqueeze(-1)
    curves = torch.einsum("nij,oij->nio", bspline_basis(x, grid, k), w)  # (batch, in, out)
    xs = torch.sort(x, dim=0).values
    adaptive = xs[torch.linspace(0, n - 1, g + 1, dtype=torch.int64)]
    step = (xs[-1] - xs[0] + 2 * margin) / g
    i = torch.arange(g + 1, dtype=x.dtype).unsqueeze(1)
    knots = grid_eps * (i * step + xs[0] - margin) + (1 - grid_eps) * adaptive
    j = torch.arange(1, k + 1, dtype=x.dtype).unsqueeze(1)
    new_grid = torch.cat([knots[:1] - j.flip(0) * step, knots, knots[-1:] + j * step]).T.contiguous()
    coeff = curve2coeff(x, curves, new_grid, k)
    if preserve and spline_scaler is not None:
        s = spline_scaler.unsqueeze(-1)
        coeff = torch.where(s == 0, torch.zeros_like(coeff), coeff / s)
    return new_grid, coeff


def kan_regularization_loss(spline_weight, regularize_activation=1.0, regularize_entropy=1.0):
    """efficient-kan's regulariser: L1 = Σ mean_j |w[o,i,j]|, plus the entropy of its (o, i) shares."""
    l1 = spline_weight.abs().mean(-1)
    total = l1.sum()
    p = l1 / total
    return regularize_activation * total - regularize_entropy * (p * p.log()).sum()


class KANLinear(torch.nn.Module):
    """efficient-kan's layer in plain torch on the functions above: the oracle of swisk.nn.KANLinear
    (same arguments, names, random-draw order) and the memory-hungry baseline it replaces."""

    def __init__(self, in_features, out_features, grid_size=5, spline_order=3, scale_noise=0.1, scale_base=1.0,
                 scale_spline=1.0, enable_standalone_scale_spline=True, base_activation=torch.nn.SiLU, grid_eps=0.02,
                 grid_range=(-1, 1)):
        super().__init__()
        self.in_features, self.out_features, self.grid_size, self.spline_order = (
            in_features, out_features, grid_size, spline_order)
        self.register_buffer("grid", kan_grid(in_features, grid_size, spline_order, grid_range))
        self.base_weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.spline_weight = torch.nn.Parameter(torch.empty(out_features, in_features, grid_size + spline_order))
        self.enable_standalone_scale_spline = enable_standalone_scale_spline
        if enable_standalone_scale_spline:
            self.spline_scaler = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.scale_noise, self.scale_base, self.scale_spline = scale_noise, scale_base, scale_spline
        self.base_activation, self.grid_eps = base_activation(), grid_eps
        g, k = grid_size, spline_order
        # draws, in order: base_weight, the noise curves, spline_scaler
        torch.nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5) * scale_base)
        with torch.no_grad():
            noise = (torch.rand(g + 1, in_features, out_features) - 0.5) * scale_noise / g
            coeff = curve2coeff(self.grid.T[k:k + g + 1], noise.to(self.grid), self.grid, k)  # at the g + 1 knots
            self.spline_weight.copy_((1.0 if enable_standalone_scale_spline else scale_spline) * coeff)
        if enable_standalone_scale_spline:
            torch.nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5) * scale_spline)

    @property
    def spline_scaler_or_none(self):
        return self.spline_scaler if self.enable_standalone_scale_spline else None

    def forward(self, x):
        return kan_linear(x, self.grid, self.base_weight, self.spline_weight, self.spline_scaler_or_none,
                          self.spline_order, self.base_activation)

    @torch.no_grad()
    def update_grid(self, x, margin=0.01, preserve=False):
        grid, coeff = kan_update_grid(x, self.grid, self.spline_weight, self.spline_scaler_or_none,
                                      self.spline_order, self.grid_eps, margin, preserve)
        self.grid.copy_(grid)
        self.spline_weight.copy_(coeff)

    def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0):
        return kan_regularization_loss(self.spline_weight, regularize_activation, regularize_entropy)


class KAN(torch.nn.Module):
    """efficient-kan's stack of KANLinear layers, on the reference layer."""

    def __init__(self, layers_hidden, **kwargs):
        super().__init__()
        self.layers = torch.nn.ModuleList(KANLinear(i, o, **kwargs) for i, o in zip(layers_hidden, layers_hidden[1:]))

    def forward(self, x, update_grid=False):
        for layer in self.layers:
            if update_grid:
                layer.update_grid(x)
            x = layer(x)
        return x

    def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0):
        return sum(layer.regularization_loss(regularize_activation, regularize_entropy) for layer in self.layers)
