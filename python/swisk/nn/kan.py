"""efficient-kan's KANLinear and KAN on the fused swisk.ops.kan_linear: the same constructor, parameter
and buffer names, shapes and initialisation, so an efficient-kan state_dict loads and gives the same
outputs, without the (batch, in, n_basis) basis tensor."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .. import ops
from ..reference.spline import kan_grid
from ._checks import (LAYER_RAISES_DOC, SPLINE_ARGS_DOC, check_input, flag_arg, int_arg, module_class_arg, range_arg,
                      real_arg, widths_arg)


def _check_args(layer, grid_size, spline_order, scale_noise, scale_base, scale_spline, base_activation, grid_eps,
                grid_range):
    """The constructor arguments KANLinear and KAN share, checked in the caller's name."""
    from .. import build_info  # swisk is fully imported by the time a layer is built

    max_order = build_info()["max_spline_order"]
    return dict(grid_size=int_arg(layer, "grid_size", grid_size, 1),
                spline_order=int_arg(layer, "spline_order", spline_order, 0, max_order),
                scale_noise=real_arg(layer, "scale_noise", scale_noise),
                scale_base=real_arg(layer, "scale_base", scale_base),
                scale_spline=real_arg(layer, "scale_spline", scale_spline),
                base_activation=module_class_arg(layer, "base_activation", base_activation),
                grid_eps=real_arg(layer, "grid_eps", grid_eps, 0.0, 1.0),
                grid_range=range_arg(layer, "grid_range", grid_range))


class KANLinear(torch.nn.Module):
    __doc__ = """y = base_activation(x) @ base_weightᵀ + Σ_i Σ_j spline_weight[o,i,j]·spline_scaler[o,i]·B_j(x_i).

    Parameters ``base_weight`` (out, in), ``spline_weight`` (out, in, grid_size + spline_order),
    ``spline_scaler`` (out, in; only with ``enable_standalone_scale_spline``) and the buffer ``grid``
    (in, grid_size + 2·spline_order + 1) are efficient-kan's. With SiLU the whole layer is one fused op;
    another ``base_activation`` runs the base branch in plain torch and the spline branch fused.

    ``update_grid(x)`` computes what efficient-kan's does: it stores the least-squares refit of the
    (already scaled) spline curves in ``spline_weight``, so forward applies ``spline_scaler`` a second
    time and the layer's function changes. ``update_grid(x, preserve=True)`` divides the refit by
    ``spline_scaler`` (entries whose scaler is exactly 0 get 0), which keeps the layer's output on x up
    to the fit. The two agree without ``enable_standalone_scale_spline``. ``reset_parameters()`` also puts
    the knots back on ``grid_range`` (as torch's layers reset their buffers, so a layer built on the meta
    device is whole after ``to_empty`` and ``reset_parameters``; efficient-kan's keeps updated knots).

    Args:
        in_features, out_features: the widths.
""" + SPLINE_ARGS_DOC + """        enable_standalone_scale_spline: whether spline_scaler exists.

""" + LAYER_RAISES_DOC

    def __init__(self, in_features, out_features, grid_size=5, spline_order=3, scale_noise=0.1, scale_base=1.0,
                 scale_spline=1.0, enable_standalone_scale_spline=True, base_activation=torch.nn.SiLU, grid_eps=0.02,
                 grid_range=[-1, 1]):  # noqa: B006 (efficient-kan's signature)
        super().__init__()
        a = _check_args("KANLinear", grid_size, spline_order, scale_noise, scale_base, scale_spline, base_activation,
                        grid_eps, grid_range)
        fin = self.in_features = int_arg("KANLinear", "in_features", in_features, 1)
        fout = self.out_features = int_arg("KANLinear", "out_features", out_features, 1)
        g, k = self.grid_size, self.spline_order = a["grid_size"], a["spline_order"]
        lo, hi = a["grid_range"]
        self._grid_range = (lo, hi)
        self.register_buffer("grid", self._initial_grid())
        self.base_weight = torch.nn.Parameter(torch.empty(fout, fin))
        self.spline_weight = torch.nn.Parameter(torch.empty(fout, fin, g + k))
        self.enable_standalone_scale_spline = flag_arg("KANLinear", "enable_standalone_scale_spline",
                                                       enable_standalone_scale_spline)
        if self.enable_standalone_scale_spline:
            self.spline_scaler = torch.nn.Parameter(torch.empty(fout, fin))
        self.scale_noise, self.scale_base, self.scale_spline = a["scale_noise"], a["scale_base"], a["scale_spline"]
        self.base_activation = a["base_activation"]()
        self.grid_eps = a["grid_eps"]
        self.reset_parameters()

    def _initial_grid(self) -> torch.Tensor:
        """The knots of grid_range, extended by spline_order on each side, for every input."""
        return kan_grid(self.in_features, self.grid_size, self.spline_order, self._grid_range)

    def reset_parameters(self):
        torch.nn.init.kaiming_uniform_(self.base_weight, a=math.sqrt(5) * self.scale_base)
        if self.spline_weight.is_meta:  # shapes only (torch.device("meta")): no curve to fit
            return
        with torch.no_grad():
            self.grid.copy_(self._initial_grid())  # the knots too, as torch's layers reset their buffers
            g, k = self.grid_size, self.spline_order
            noise = (torch.rand(g + 1, self.in_features, self.out_features) - 0.5) * self.scale_noise / g
            scale = 1.0 if self.enable_standalone_scale_spline else self.scale_spline
            # the g + 1 knots of grid_range (efficient-kan's grid.T[k:-k], which is empty for k = 0)
            coeff = self.curve2coeff(self.grid.T[k:k + g + 1], noise.to(self.grid))
            self.spline_weight.copy_(scale * coeff)
            if self.enable_standalone_scale_spline:
                torch.nn.init.kaiming_uniform_(self.spline_scaler, a=math.sqrt(5) * self.scale_spline)

    def b_splines(self, x: torch.Tensor, grid: torch.Tensor | None = None) -> torch.Tensor:
        """(batch, in) -> (batch, in, grid_size + spline_order): the bases efficient-kan materialises
        (on the layer's knots, or on ``grid`` (in, n_knots) when given)."""
        grid = self.grid if grid is None else grid
        return ops.bspline_basis(x, grid.to(x.dtype), self.spline_order)

    def curve2coeff(self, x: torch.Tensor, y: torch.Tensor, grid: torch.Tensor | None = None) -> torch.Tensor:
        """Least-squares coefficients (out, in, n_basis) of per-feature curves y (batch, in, out) at x (batch, in)."""
        a = self.b_splines(x, grid).transpose(0, 1)  # (in, batch, n_basis)
        wide = torch.promote_types(a.dtype, torch.float32)  # lstsq takes no fp16/bf16: solved in fp32
        sol = torch.linalg.lstsq(a.to(wide), y.transpose(0, 1).to(wide)).solution  # (in, n_basis, out)
        return sol.permute(2, 0, 1).to(a.dtype).contiguous()

    @property
    def scaled_spline_weight(self) -> torch.Tensor:
        if self.enable_standalone_scale_spline:
            return self.spline_weight * self.spline_scaler.unsqueeze(-1)
        return self.spline_weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_input("KANLinear", x, self.in_features, self.spline_weight)
        scaler = self.spline_scaler if self.enable_standalone_scale_spline else None
        if isinstance(self.base_activation, torch.nn.SiLU):
            return ops.kan_linear(x, self.grid, self.base_weight, self.spline_weight, scaler, self.spline_order)
        spline = ops.kan_linear(x, self.grid, None, self.spline_weight, scaler, self.spline_order)
        return F.linear(self.base_activation(x), self.base_weight) + spline

    @torch.no_grad()
    def update_grid(self, x: torch.Tensor, margin: float = 0.01, preserve: bool = False):
        """efficient-kan's adaptive knots from x (..., in), then the least-squares refit of the spline
        curves on them: stored as efficient-kan does, or, with ``preserve``, divided by ``spline_scaler``
        so that the layer's function on x is kept (see the class docstring).

        All or nothing: the new knots and weights are computed and checked first, then assigned, so a
        call that raises (non-finite x or weights, knots that collapse, ...) leaves the layer unchanged."""
        name = "KANLinear"
        check_input(name, x, self.in_features, self.spline_weight)
        margin = real_arg(name, "margin", margin, lo=0.0)
        preserve = flag_arg(name, "preserve", preserve)
        x = x.reshape(-1, self.in_features)
        batch, g, k = x.size(0), self.grid_size, self.spline_order
        if batch == 0:
            raise ValueError(f"[{name}] update_grid: x holds no samples")
        if not torch.isfinite(x).all():
            raise ValueError(f"[{name}] update_grid: x holds NaN or inf")
        for arg in ("spline_weight", "spline_scaler") if self.enable_standalone_scale_spline else ("spline_weight",):
            if not torch.isfinite(getattr(self, arg)).all():
                raise ValueError(f"[{name}] update_grid: {arg} holds NaN or inf, which cannot be refitted")
        # the old spline branch, per feature: (in, batch, out)
        per_feature = torch.bmm(self.b_splines(x).transpose(0, 1), self.scaled_spline_weight.permute(1, 2, 0))
        xs = torch.sort(x, dim=0)[0]
        adaptive = xs[torch.linspace(0, batch - 1, g + 1, dtype=torch.int64, device=x.device)]
        step = (xs[-1] - xs[0] + 2 * margin) / g
        uniform = torch.arange(g + 1, dtype=x.dtype, device=x.device).unsqueeze(1) * step + xs[0] - margin
        grid = self.grid_eps * uniform + (1 - self.grid_eps) * adaptive
        ext = torch.arange(1, k + 1, dtype=x.dtype, device=x.device).unsqueeze(1) * step
        grid = torch.cat([grid[:1] - ext.flip(0), grid, grid[-1:] + ext], dim=0).T.to(self.grid.dtype)
        if not (torch.isfinite(grid).all() and (grid[:, 1:] > grid[:, :-1]).all()):
            raise ValueError(f"[{name}] update_grid: the new knots are not strictly increasing (too few distinct "
                             f"values of x per feature for grid_size={g}; raise grid_eps or margin)")
        coeff = self.curve2coeff(x, per_feature.transpose(0, 1), grid)
        if preserve and self.enable_standalone_scale_spline:
            s = self.spline_scaler.unsqueeze(-1)
            coeff = torch.where(s == 0, torch.zeros_like(coeff), coeff / torch.where(s == 0, torch.ones_like(s), s))
        if not torch.isfinite(coeff).all():
            raise ValueError(f"[{name}] update_grid: the refit gave non-finite spline weights")
        self.grid.copy_(grid)
        self.spline_weight.copy_(coeff)

    def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0) -> torch.Tensor:
        """efficient-kan's stand-in for the paper's L1 + entropy regulariser, on the spline weights."""
        l1 = self.spline_weight.abs().mean(-1)
        act = l1.sum()
        p = l1 / act
        return regularize_activation * act + regularize_entropy * -(p * p.log()).sum()


class KAN(torch.nn.Module):
    __doc__ = """A stack of KANLinear layers (efficient-kan's KAN): layers_hidden = [in, hidden..., out].

    Args:
        layers_hidden: the widths, at least two.
""" + SPLINE_ARGS_DOC + "\n" + LAYER_RAISES_DOC

    def __init__(self, layers_hidden, grid_size=5, spline_order=3, scale_noise=0.1, scale_base=1.0,
                 scale_spline=1.0, base_activation=torch.nn.SiLU, grid_eps=0.02, grid_range=[-1, 1]):  # noqa: B006
        super().__init__()
        widths = widths_arg("KAN", "layers_hidden", layers_hidden)
        a = _check_args("KAN", grid_size, spline_order, scale_noise, scale_base, scale_spline, base_activation,
                        grid_eps, grid_range)
        self.grid_size, self.spline_order = a["grid_size"], a["spline_order"]
        self.layers = torch.nn.ModuleList(KANLinear(i, o, **a) for i, o in zip(widths, widths[1:]))

    def forward(self, x: torch.Tensor, update_grid: bool = False) -> torch.Tensor:
        for layer in self.layers:
            if update_grid:
                layer.update_grid(x)
            x = layer(x)
        return x

    def regularization_loss(self, regularize_activation=1.0, regularize_entropy=1.0) -> torch.Tensor:
        return sum(layer.regularization_loss(regularize_activation, regularize_entropy) for layer in self.layers)
