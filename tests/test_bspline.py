"""swisk.ops.bspline_basis against swisk.reference on every backend."""
import pytest
import torch

import swisk
from swisk import reference, testing
from conftest import TOL


def default_grid(features, grid_size=5, order=3, lo=-1.0, hi=1.0, dtype=torch.float64):
    h = (hi - lo) / grid_size
    return (torch.arange(-order, grid_size + order + 1, dtype=dtype) * h + lo).expand(features, -1).contiguous()


def random_grid(features, n_knots, rng, dtype=torch.float64):
    """Strictly increasing, non-uniform knots per feature."""
    steps = torch.rand(features, n_knots, generator=rng, dtype=torch.float64) + 0.05
    return (torch.cumsum(steps, -1) - steps.sum(-1, keepdim=True) / 2).to(dtype)


def test_known_answer_at_zero(backend):
    dtype = torch.float32
    g = default_grid(3, dtype=dtype)
    y = swisk.ops.bspline_basis(torch.zeros(2, 3, dtype=dtype), g, 3)
    want = torch.tensor([0, 0, 1 / 48, 23 / 48, 23 / 48, 1 / 48, 0, 0], dtype=dtype)
    torch.testing.assert_close(y[1, 2], want, atol=1e-7, rtol=0)


@pytest.mark.parametrize("order", [0, 1, 3, 5])
def test_matches_reference(backend, rng, order):
    dev = testing.device_of(backend)
    for dtype in testing.dtypes_of(backend):
        grid = random_grid(6, 9 + 2 * order, rng)
        span = grid[:, -1] - grid[:, 0]
        # inside, outside and exactly on knots
        x = (torch.rand(4, 33, 6, generator=rng, dtype=torch.float64) * 1.4 - 0.7) * span + grid.mean(-1)
        x[0, :3] = grid[:, 4]
        x[1, :3] = grid[:, 0]
        x[2, :3] = grid[:, -1]
        xt, gt = x.to(dtype), grid.to(dtype)
        want = reference.bspline_basis(xt.double(), gt.double(), order)
        got = swisk.ops.bspline_basis(xt.to(dev), gt.to(dev), order).cpu().double()
        assert got.shape == (4, 33, 6, grid.shape[1] - 1 - order)
        err = (got - want).abs().max().item()
        assert err <= TOL[dtype], f"{backend} {dtype} order {order}: max error {err:.3g} (seed {rng.initial_seed()})"


@pytest.mark.parametrize("features, order, grid_size", [(1, 3, 5), (3, 3, 5), (37, 3, 5), (300, 3, 5),
                                                        (600, 1, 30), (2, 0, 3)])
def test_expansion_tiles_across_rows(backend, rng, features, order, grid_size):
    """kan_expand's GPU body writes tiles of up to 4096 values that start mid-row and run into the next
    rows (rows of 8-30 values: many rows per tile; 2400-4800: a row's end inside a tile): every value
    against the formulation, with a NaN input; on a GPU (knots unchecked there) a feature whose knots
    do not increase gets NaN bases, elsewhere a ValueError."""
    dev = testing.device_of(backend)
    n_knots = grid_size + 2 * order + 1  # per feature a scaled, shifted uniform grid: distinct in fp16 too
    scale = torch.rand(features, 1, generator=rng, dtype=torch.float64) + 0.5
    grid = torch.linspace(-2, 2, n_knots, dtype=torch.float64) * scale + torch.randn(features, 1, generator=rng,
                                                                                    dtype=torch.float64) * 0.3
    span = grid[:, -1] - grid[:, 0]
    x = (torch.rand(23, features, generator=rng, dtype=torch.float64) * 1.3 - 0.65) * span + grid.mean(-1)
    x[5, 0] = float("nan")
    nb, bad, used = grid_size + order, features // 2, grid
    if features > 1:
        broken = grid.clone()
        broken[bad, 3] = broken[bad, 2]  # a repeated knot: not strictly increasing
        if dev.type == "cpu":
            with pytest.raises(ValueError, match="strictly increasing"):
                swisk.ops.kan_expand(x.float(), broken.float(), order)
        else:
            used = broken
    for dtype in testing.dtypes_of(backend):
        xd, gd = x.to(dtype).double(), grid.to(dtype).double()  # the formulation on the rounded inputs
        want = torch.cat([torch.nn.functional.silu(xd), reference.bspline_basis(xd, gd, order).flatten(-2)], -1)
        if used is not grid:
            want[:, features + bad * nb:features + (bad + 1) * nb] = float("nan")
        got = swisk.ops.kan_expand(x.to(dev, dtype), used.to(dev, dtype), order).cpu().double()
        assert torch.isnan(got).equal(torch.isnan(want)), backend
        assert torch.allclose(got, want, atol=TOL[dtype], rtol=TOL[dtype], equal_nan=True), (backend, dtype)


@pytest.mark.parametrize("rows, features, grid_size", [(1, 2, 5), (33, 65, 5), (17, 33, 16), (3, 17, 200),
                                                      (5, 3, 1427), (5, 3, 1428), (2, 2, 6200), (600, 2, 5),
                                                      (1100, 1, 3)])
def test_expand_and_contract_tiles(backend, rng, rows, features, grid_size):
    """The GPUs' tiled bodies (tiles of up to 32 features, fewer for fewer features, by rows up to 512
    elements, fewer of both as n_basis grows; with their knot tables the largest tiled grid at order 3
    is 1427 intervals, 1428 takes the untiled bodies) at the tile edges: kan_expand and kan_contract
    (silu columns and bases, a NaN input) against the formulation; per feature a scaled, shifted
    uniform grid (its knots distinct in 16-bit floats up to 16 intervals)."""
    dev, order, n_knots = testing.device_of(backend), 3, grid_size + 2 * 3 + 1
    scale = torch.rand(features, 1, generator=rng, dtype=torch.float64) + 0.5
    grid = torch.linspace(-2, 2, n_knots, dtype=torch.float64) * scale + torch.randn(features, 1, generator=rng,
                                                                                    dtype=torch.float64) * 0.3
    span = grid[:, -1] - grid[:, 0]
    x = (torch.rand(rows, features, generator=rng, dtype=torch.float64) * 1.2 - 0.6) * span + grid.mean(-1)
    x[-1, 0] = float("nan")
    g = torch.randn(rows, features * (grid_size + order + 1), generator=rng, dtype=torch.float64)
    for dtype in testing.dtypes_of(backend):
        if dtype in (torch.float16, torch.bfloat16) and grid_size > 16:
            continue
        xd, gd, god = x.to(dtype), grid.to(dtype), g.to(dtype)
        tol = TOL[dtype] * max(1, grid_size / 5)  # x's rounding over knot intervals of 4 / grid_size
        want = reference.kan_expand(xd.double(), gd.double(), order, 0, True)
        got = torch.ops.swisk.kan_expand(xd.to(dev), gd.to(dev), order, 0, True).cpu().double()
        assert torch.allclose(got, want, atol=tol, rtol=tol, equal_nan=True), (backend, dtype)
        want = reference.kan_contract(xd.double(), gd.double(), god.double(), order, 1, True)
        got = torch.ops.swisk.kan_contract(xd.to(dev), gd.to(dev), god.to(dev), order, 1, True).cpu().double()
        tol = tol * max(1, grid_size / 5) * (1 + want.nan_to_num(0).abs().max().item())  # dB/dx ~ grid_size
        assert torch.allclose(got, want, atol=tol, rtol=TOL[dtype], equal_nan=True), (backend, dtype)


def test_non_contiguous_and_batch_shapes(backend, rng):
    grid = random_grid(5, 12, rng).float()
    x = torch.randn(5, 7, 3, generator=rng).transpose(0, 2)  # (3, 7, 5), non-contiguous
    assert not x.is_contiguous()
    got = swisk.ops.bspline_basis(x, grid, 3)
    torch.testing.assert_close(got, reference.bspline_basis(x, grid, 3), atol=2e-6, rtol=0)
    single = swisk.ops.bspline_basis(x[0, 0], grid, 3)  # (in,) -> (in, n_basis)
    torch.testing.assert_close(single, got[0, 0])


def test_special_values(backend):
    g = default_grid(3, dtype=torch.float32)
    x = torch.tensor([[float("inf"), float("-inf"), float("nan")]])
    y = swisk.ops.bspline_basis(x, g, 3)
    assert torch.equal(y[0, 0], torch.zeros(8)) and torch.equal(y[0, 1], torch.zeros(8))
    assert torch.isnan(y[0, 2]).all()
    r = reference.bspline_basis(x, g, 3)
    assert torch.equal(r[0, :2], y[0, :2]) and torch.isnan(r[0, 2]).all()


def test_backward_matches_reference(backend, rng):
    dtype = torch.float32
    grid = random_grid(4, 11, rng).to(dtype)
    x = (torch.randn(17, 4, generator=rng) * 1.5).to(dtype).requires_grad_()
    go = torch.randn(17, 4, 7, generator=rng).to(dtype)
    (gx,) = torch.autograd.grad(swisk.ops.bspline_basis(x, grid, 3), x, go)
    xr = x.detach().double().requires_grad_()
    (want,) = torch.autograd.grad(reference.bspline_basis(xr, grid.double(), 3), xr, go.double())
    assert (gx.double() - want).abs().max().item() <= 1e-4 * (1 + want.abs().max().item())


@pytest.mark.parametrize("order", [1, 2, 3])
def test_gradcheck_fp64(rng, order):
    grid = random_grid(3, 10, rng)
    x = (torch.rand(6, 3, generator=rng, dtype=torch.float64) - 0.5) * (grid[:, -1] - grid[:, 0]) * 0.9
    x = testing.away_from_knots(x, grid).requires_grad_()  # the bases are only piecewise smooth
    assert torch.autograd.gradcheck(lambda t: swisk.ops.bspline_basis(t, grid, order), (x,))


def test_opcheck(rng):
    grid = random_grid(4, 12, rng).float()
    x = torch.randn(5, 4, generator=rng, requires_grad=True)
    for m in (0, 1, 4):
        torch.library.opcheck(torch.ops.swisk.bspline_basis.default, (x, grid, 3, m))
        torch.library.opcheck(torch.ops.swisk.kan_expand.default, (x, grid, 3, m, True))
    go = torch.randn(5, 4 + 4 * 8, generator=rng)
    torch.library.opcheck(torch.ops.swisk.kan_contract.default, (x.detach(), grid, go, 3, 1, True))


def test_compile_fullgraph(rng):
    grid = random_grid(4, 12, rng).float()

    @torch.compile(fullgraph=True)
    def f(x):
        return swisk.ops.bspline_basis(torch.tanh(x), grid, 3).sum(-1) * 2

    x = torch.randn(8, 4, generator=rng)
    torch.testing.assert_close(f(x), reference.bspline_basis(torch.tanh(x), grid, 3).sum(-1) * 2)


def bad(exc, match, *args):
    with pytest.raises(exc, match=match):
        swisk.ops.bspline_basis(*args)


def test_bad_inputs():
    g = default_grid(4, dtype=torch.float32)
    x = torch.randn(3, 4)
    bad(ValueError, r"\[bspline_basis\] grid: must be \(in, n_knots\)", x, g[0], 3)
    bad(ValueError, r"\[bspline_basis\] grid: must be \(in, n_knots\) with in = x.shape\[-1\] = 4", x, g[:3], 3)
    bad(ValueError, r"\[bspline_basis\] x: must be \(\.\.\., in\)", torch.tensor(1.0), g, 3)
    bad(ValueError, r"\[bspline_basis\] spline_order: must be >= 0", x, g, -1)
    bad(ValueError, r"\[bspline_basis\] spline_order: at most 63 is supported on cpu, got 64", x, g, 64)
    bad(ValueError, r"\[bspline_basis\] spline_order: 3 needs at least 5 knots", x, g[:, :4].contiguous(), 3)
    bad(TypeError, r"\[bspline_basis\] x: expected a floating-point tensor, got int64", x.long(), g, 3)
    bad(TypeError, r"\[bspline_basis\] grid: dtype float64 differs from x's float32", x, g.double(), 3)
    bad(TypeError, r"\[bspline_basis\] spline_order: expected an int", x, g, 3.0)
    bad(TypeError, r"\[bspline_basis\] x: expected a torch.Tensor", [[0.0] * 4], g, 3)
    flat = g.clone()
    flat[2, 5] = flat[2, 4]
    bad(ValueError, r"\[bspline_basis\] grid: knots must be strictly increasing; row 2 is not at index 5", x, flat, 3)
    grad = swisk.ops.kan_expand(x, g, 3)
    for name, call in (("kan_expand", lambda: swisk.ops.kan_expand(x, flat, 3)),  # each op's own name
                       ("kan_contract", lambda: torch.ops.swisk.kan_contract(x, flat, grad, 3, 1, True))):
        with pytest.raises(ValueError, match=rf"\[{name}\] grid: knots must be strictly increasing"):
            call()
    nan = g.clone()
    nan[1, 0] = float("nan")
    bad(ValueError, r"row 1 has a non-finite knot at 0", x, nan, 3)
    for b in ("cuda-emu", "metal-emu"):
        with testing.backend(b):
            bad(TypeError, r"\[bspline_basis\] x: float64 is not supported", x.double(), g.double(), 3)
            with pytest.raises(TypeError, match=r"\[kan_expand\] x: float64 is not supported"):
                swisk.ops.kan_expand(x.double(), g.double(), 3)
            with pytest.raises(TypeError, match=r"\[sketch\] x: float64 is not supported"):
                swisk.ops.sketch(x.double(), "gaussian", 2, 0)
            with pytest.raises(TypeError, match=r"\[kan_conv1d\] x: float64 is not supported"):
                swisk.ops.kan_conv1d(torch.randn(1, 4, 5, dtype=torch.float64), g.double(), None,
                                     torch.randn(2, 4 * (g.shape[1] - 4), 3, dtype=torch.float64), None, 3)


@pytest.mark.skipif(not swisk.backends()["cuda"], reason="needs a CUDA device")
def test_mixed_devices():
    g = default_grid(4, dtype=torch.float32)
    bad(ValueError, r"\[bspline_basis\] grid: is on cpu:0 but x is on cuda:0", torch.randn(3, 4, device="cuda"), g, 3)


def test_autocast_keeps_input_dtype(rng):
    """Under autocast the basis runs in its input dtype (it is not down-cast, like torch's fp32 ops)."""
    grid = random_grid(4, 12, rng).float()
    x = torch.randn(6, 4, generator=rng)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = swisk.ops.bspline_basis(x, grid, 3)
        yb = swisk.ops.bspline_basis(x.bfloat16(), grid.bfloat16(), 3)
    assert y.dtype == torch.float32 and yb.dtype == torch.bfloat16
    torch.testing.assert_close(y, reference.bspline_basis(x, grid, 3), atol=2e-6, rtol=0)


def test_empty_inputs(backend):
    g = default_grid(4, dtype=torch.float32)
    assert swisk.ops.bspline_basis(torch.empty(0, 4), g, 3).shape == (0, 4, 8)
    assert swisk.ops.bspline_basis(torch.empty(5, 0), g[:0], 3).shape == (5, 0, 8)
    x = torch.empty(0, 4, requires_grad=True)
    swisk.ops.bspline_basis(x, g, 3).sum().backward()
    assert x.grad.shape == (0, 4)
