"""Gradients in the knots: the kernels hold grid constant, and where autograd asks for grid's gradient
it comes from the op's formulation, as torch differentiates efficient-kan's b_splines (never a
silent None)."""
import pytest
import torch

import swisk
from swisk import reference, testing

from test_bspline import random_grid
from test_kan_conv import make as make_conv, ref as ref_conv
from test_kan_linear import make as make_linear, ref as ref_linear

F64 = torch.float64
OPS = ["bspline_basis", "bspline_basis_d1", "kan_expand", "kan_contract", "kan_linear", "kan_conv2d"]


def _case(name, rng):
    """(swisk's op, its reference, its inputs (x, grid, ...) in fp64, which of them take gradients)."""
    if name.startswith("kan_linear"):
        args = make_linear(rng, 7, 3, 4, 4, 3)
        return (lambda *a: swisk.ops.kan_linear(*a, 3), lambda *a: ref_linear(*a, 3), args, (0, 1, 2, 3, 4))
    if name == "kan_conv2d":
        args = make_conv(rng, 2, 2, 2, 3, 5, 3, g=3)
        return (lambda *a: swisk.ops.kan_conv2d(*a, 3, 1, 1), lambda *a: ref_conv(a, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1),
                args, (0, 1, 3))
    grid = random_grid(3, 11, rng)
    x = (torch.rand(9, 3, generator=rng, dtype=F64) * 1.2 - 0.6) * (grid[:, -1] - grid[:, 0]) + grid.mean(-1)
    if name == "kan_contract":
        g = torch.randn(9, 3 + 3 * 7, generator=rng, dtype=F64)
        return (lambda *a: torch.ops.swisk.kan_contract(*a, 3, 1, True),
                lambda *a: reference.kan_contract(*a, 3, 1, True), [x, grid, g], (0, 1, 2))
    if name == "kan_expand":
        return (lambda *a: swisk.ops.kan_expand(*a, 3, 0, True), lambda *a: reference.kan_expand(*a, 3, 0, True),
                [x, grid], (1,))
    m = 1 if name.endswith("d1") else 0
    return (lambda *a: swisk.ops.bspline_basis(*a, 3, m), lambda *a: reference.bspline_basis(*a, 3, m), [x, grid],
            (0, 1))


@pytest.mark.parametrize("name", OPS)
def test_knot_gradients_match_the_formulation(backend, rng, name):
    op, formulation, args, moving = _case(name, rng)
    dev = testing.device_of(backend)
    dtype = testing.dtypes_of(backend)[0]
    args = [testing.away_from_knots(args[0], args[1], dim=1 if name == "kan_conv2d" else -1)] + args[1:]
    ours = [t.to(dev, dtype).requires_grad_(i in moving) for i, t in enumerate(args)]
    theirs = [t.clone().requires_grad_(i in moving) for i, t in enumerate(args)]
    y = op(*ours)
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    got = torch.autograd.grad(y, [ours[i] for i in moving], go.to(dev, dtype))
    want = torch.autograd.grad(formulation(*theirs), [theirs[i] for i in moving], go)
    tol = 1e-10 if dtype == F64 else 2e-3
    for i, g, w in zip(moving, got, want):
        assert g is not None, i
        err = (g.cpu().double() - w).abs().max() / w.abs().max().clamp_min(1e-30)
        assert err <= tol, (i, err.item())
    assert want[moving.index(1)].abs().max() > 0  # the knots do move the output


@pytest.mark.parametrize("name", ["bspline_basis", "kan_linear"])
def test_knot_gradcheck(rng, name):
    op, _, args, moving = _case(name, rng)
    args[0] = testing.away_from_knots(args[0], args[1])
    ins = [t.clone().requires_grad_(i in moving) for i, t in enumerate(args)]
    assert torch.autograd.gradcheck(op, ins)
    assert torch.autograd.gradgradcheck(op, ins)


def test_a_trainable_grid_is_trained(rng):
    """A layer whose grid is made a parameter gets its gradient (the knots move in an optimiser step)."""
    layer = swisk.nn.KANLinear(3, 2).double()
    layer.grid = torch.nn.Parameter(layer.grid.clone())
    x = torch.rand(5, 3, generator=rng, dtype=F64) * 1.6 - 0.8
    layer(x).square().sum().backward()
    assert layer.grid.grad is not None and layer.grid.grad.abs().max() > 0


@pytest.mark.parametrize("name", ["bspline_basis", "kan_linear"])
def test_knot_tangents_match_the_formulation(rng, name):
    """Forward mode agrees: a tangent in the knots (torch.func.jvp) as the formulation's."""
    op, formulation, args, _ = _case(name, rng)
    args[0] = testing.away_from_knots(args[0], args[1])
    t = torch.randn(args[1].shape, generator=rng, dtype=F64)
    rest = args[2:]
    _, got = torch.func.jvp(lambda g: op(args[0], g, *rest), (args[1],), (t,))
    _, want = torch.func.jvp(lambda g: formulation(args[0], g, *rest), (args[1],), (t,))
    assert want.abs().max() > 0
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
