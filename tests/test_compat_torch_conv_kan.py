"""swisk.compat.torch_conv_kan: torch-conv-kan's KANConv{1,2,3}DLayer surface (constructor, modules,
state_dict names, init draws, numbers, dropout draws, training) against swisk.reference.torch_conv_kan."""
import functools
import importlib.util
import inspect

import pytest
import torch
import torch.nn as nn

import swisk
from swisk.compat import torch_conv_kan as compat
from swisk.reference import torch_conv_kan as ref_mod

X_SHAPES = {1: (3, 4, 11), 2: (2, 4, 7, 6), 3: (2, 4, 8, 6, 7)}  # InstanceNorm over >= 10 outputs


def _seed(rng):
    return int(torch.randint(0, 2**31, (1,), generator=rng))


def _pair(nd, seed, *args, **kw):
    """(swisk layer, oracle layer), each built under torch.manual_seed(seed), plus the next draw of each."""
    out = []
    for mod in (compat, ref_mod):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            out += [getattr(mod, f"KANConv{nd}DLayer")(*args, **kw), torch.rand(3)]
    return out


def _perturb(module, rng):
    """Move PReLU slopes and norm affines off their constant initial values."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if not name.startswith(("base_conv", "spline_conv")):
                p.copy_(0.5 + 0.3 * torch.randn(p.shape, generator=rng, dtype=torch.float64))


def test_import_path_and_signatures():
    from swisk.compat.torch_conv_kan import KANConv2DLayer

    assert swisk.compat.torch_conv_kan.KANConv2DLayer is KANConv2DLayer
    for nd in (1, 2, 3):
        name = f"KANConv{nd}DLayer"
        got, want = (inspect.signature(getattr(m, name)) for m in (compat, ref_mod))
        assert got == want, name
        assert want.parameters["norm_layer"].default is getattr(nn, f"InstanceNorm{nd}d")
        assert getattr(compat, name).__name__ == name


@pytest.mark.parametrize("nd,kw", [
    (1, dict(groups=2, dropout=0.1)),
    (2, dict(groups=2, norm_layer=nn.BatchNorm2d, base_activation=nn.PReLU)),
    (3, dict(affine=True, spline_order=2, grid_size=4)),
])
def test_modules_parameters_and_buffers_match(rng, nd, kw):
    layer, _, ref, _ = _pair(nd, _seed(rng), 4, 6, 3, **kw)
    assert [n for n, _ in layer.named_modules()] == [n for n, _ in ref.named_modules()]
    assert [(k, v.shape, v.dtype) for k, v in layer.state_dict().items()] == \
           [(k, v.shape, v.dtype) for k, v in ref.state_dict().items()]
    for attr in ("inputdim", "outdim", "spline_order", "groups", "ndim", "grid_size", "grid_range"):
        assert getattr(layer, attr) == getattr(ref, attr), attr
    assert "grid" not in layer.state_dict() and torch.equal(layer.grid, ref.grid)


def test_grid_follows_to_with_float32_knots():
    layer = compat.KANConv2DLayer(2, 2, 3, grid_range=[-1.3, 0.7])
    knots = ref_mod.torch_conv_kan_grid(5, 3, [-1.3, 0.7])
    assert layer.grid.dtype == torch.float32 and torch.equal(layer.grid, knots)
    layer.double()
    assert layer.grid.dtype == torch.float64 and torch.equal(layer.grid, knots.double())
    assert "grid" in dict(layer.named_buffers()) and "grid" not in layer.state_dict()


@pytest.mark.parametrize("nd,groups", [(1, 1), (2, 2), (3, 2)])
def test_same_seed_same_initial_weights(rng, nd, groups):
    layer, after, ref, after_ref = _pair(nd, _seed(rng), 4, 6, (3, 2, 3)[:nd], groups=groups, dropout=0.2)
    want = ref.state_dict()
    assert list(layer.state_dict()) == list(want)
    for k, v in layer.state_dict().items():
        assert torch.equal(v, want[k]), k
    assert torch.equal(after, after_ref)  # the same number of draws


CASES = [
    (1, dict()),
    (1, dict(groups=2, padding=2, stride=2, dilation=2, base_activation=nn.SiLU)),
    (2, dict(groups=2, padding=1, base_activation=nn.Identity, affine=True)),
    (2, dict(padding="same", dilation=(2, 1), kernel_size=(3, 2), base_activation=nn.Tanh)),
    (2, dict(groups=2, stride=(2, 1), padding=(0, 1), dropout=0.3, spline_order=2, grid_size=6)),
    (2, dict(base_activation=functools.partial(nn.GELU, approximate="tanh"), norm_layer=nn.BatchNorm2d)),
    (3, dict(groups=2, padding=(1, 0, 1), base_activation=nn.SiLU, dropout=0.25)),
    (3, dict(stride=2, dilation=(2, 1, 1), grid_range=[-2, 1.5], spline_order=1, affine=True)),
]


def _forward_and_grads(layer, x, go, seed):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        xr = x.clone().requires_grad_()
        y = layer(xr)
    return (y, *torch.autograd.grad(y, [xr, *layer.parameters()], go))


def _forward_and_grads_default(layer, x, seed):
    with torch.no_grad():
        go = torch.linspace(-1, 1, layer.eval()(x).numel(), dtype=x.dtype).view(layer(x).shape)
    return _forward_and_grads(layer.train(), x, go, seed)


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")
@pytest.mark.parametrize("nd,kw", CASES)
def test_forward_and_gradients_fp64(rng, nd, kw):
    """Bitwise knots: the oracle's grid as float64 (see test_default_grid_fp64 for torch-conv-kan's float32
    knot differences). Train mode (dropout draws from the same seed) and eval mode."""
    kw = dict(kw)
    kernel = kw.pop("kernel_size", 3)
    seed = _seed(rng)
    layer, _, ref, _ = _pair(nd, seed, 4, 6, kernel, **kw)
    layer.double(), ref.double()
    _perturb(ref, rng)
    layer.load_state_dict(ref.state_dict())
    ref.grid = ref.grid.double()
    x = 1.4 * torch.randn(X_SHAPES[nd], generator=rng, dtype=torch.float64)
    with torch.no_grad():
        go = torch.randn(ref.eval()(x).shape, generator=rng, dtype=torch.float64)
    for train in (True, False):
        layer.train(train), ref.train(train)
        want = _forward_and_grads(ref, x, go, seed)
        got = _forward_and_grads(layer, x, go, seed)
        assert got[0].abs().sum() > 0
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)
    for k, v in ref.state_dict().items():  # BatchNorm's running statistics after the train-mode passes
        torch.testing.assert_close(layer.state_dict()[k], v, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("grid_size,grid_range,exact", [(5, [-1, 1], False), (4, [-1, 1], True), (8, [-2, 2], True)])
def test_default_grid_fp64(rng, grid_size, grid_range, exact):
    """torch-conv-kan keeps its knots float32, so in float64 it subtracts them in float32; swisk subtracts
    the same knots in float64. Equal where those differences are exact in float32, ~1e-8 relative apart
    where they are not (the default grid)."""
    layer, _, ref, _ = _pair(2, _seed(rng), 4, 4, 3, groups=2, padding=1, grid_size=grid_size,
                             grid_range=grid_range)
    layer.double(), ref.double()
    x = 1.2 * torch.randn(2, 4, 6, 6, generator=rng, dtype=torch.float64)
    g32, g64 = ref.grid, ref.grid.double()
    assert exact == all(torch.equal((g32[k:] - g32[:-k]).double(), g64[k:] - g64[:-k]) for k in (1, 2, 3))
    got, want = _forward_and_grads_default(layer, x, 0), _forward_and_grads_default(ref, x, 0)
    tol = 1e-12 if exact else 1e-6
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=tol, rtol=tol)


def test_state_dict_round_trip(rng):
    kw = dict(groups=2, padding=1, norm_layer=nn.BatchNorm2d)
    ref = ref_mod.KANConv2DLayer(4, 6, 3, **kw)
    _perturb(ref, rng)
    ref(torch.randn(2, 4, 5, 5, generator=rng))  # running statistics
    layer = compat.KANConv2DLayer(4, 6, 3, **kw)
    layer.load_state_dict(ref.state_dict())  # torch-conv-kan -> swisk, strict
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=rng))
    back = ref_mod.KANConv2DLayer(4, 6, 3, **kw)
    back.load_state_dict(layer.state_dict())  # swisk -> torch-conv-kan, strict
    for k, v in layer.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    x = torch.randn(3, 4, 6, 6, generator=rng)
    layer.eval(), back.eval()
    torch.testing.assert_close(layer(x), back(x), atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("nd", [1, 2])
def test_training_matches_oracle_loss_curve(rng, nd):
    """Same seed, same data, Adam for 10 steps: the loss curves agree to 1e-8 in fp64, and over the first
    steps to 1e-5 in fp32. Later fp32 steps may part: a PReLU input within the two sides' roundings of 0
    takes a different slope on each side, and Adam follows it (seed 2621593999: equal through step 5,
    1.4e-4 apart at step 6, the gradients of the norm's group already 1e-2 apart at step 4)."""
    seed = _seed(rng)
    x = torch.randn(X_SHAPES[nd], generator=rng, dtype=torch.float64)
    target = None
    for dtype, tol, steps in ((torch.float64, 1e-8, 10), (torch.float32, 1e-5, 2)):
        layer, _, ref, _ = _pair(nd, seed, 4, 4, 3, groups=2, padding=1, affine=True)
        if target is None:
            target = torch.randn(layer(x.float()).shape, generator=rng, dtype=torch.float64)
        curves = []
        for m in (layer.to(dtype), ref.to(dtype)):
            opt = torch.optim.Adam(m.parameters(), lr=1e-2)
            losses = []
            for _ in range(steps):
                loss = ((m(x.to(dtype)) - target.to(dtype)) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            curves.append(torch.tensor(losses, dtype=torch.float64))
        assert curves[0][-1] < curves[0][0], dtype
        torch.testing.assert_close(curves[0], curves[1], atol=tol, rtol=0, msg=lambda m: f"{dtype}: {m}")


@pytest.mark.parametrize("args,kw", [((4, 6, 3), dict(groups=0)), ((4, 6, 3), dict(groups=-2)),
                                     ((6, 4, 3), dict(groups=4)), ((4, 6, 3), dict(groups=4))])
def test_bad_groups_raise_like_torch_conv_kan(args, kw):
    with pytest.raises(ValueError):
        ref_mod.KANConv2DLayer(*args, **kw)
    with pytest.raises(ValueError, match=r"^\[KANConv2DLayer\] (groups|input_dim|output_dim): "):
        compat.KANConv2DLayer(*args, **kw)


@pytest.mark.parametrize("kw,err,arg", [
    (dict(input_dim=0), ValueError, "input_dim"), (dict(output_dim=2.5), TypeError, "output_dim"),
    (dict(kernel_size=0), ValueError, "kernel_size"), (dict(kernel_size=(3, 3, 3)), ValueError, "kernel_size"),
    (dict(padding="full"), ValueError, "padding"), (dict(padding="same", stride=2), ValueError, "padding"),
    (dict(padding=-1), ValueError, "padding"), (dict(stride=0), ValueError, "stride"),
    (dict(dilation=(1, 0)), ValueError, "dilation\\[1\\]"), (dict(spline_order=99), ValueError, "spline_order"),
    (dict(grid_size=0), ValueError, "grid_size"), (dict(grid_range=[1, -1]), ValueError, "grid_range"),
    (dict(dropout=1.5), ValueError, "dropout"), (dict(base_activation=nn.GELU()), TypeError, "base_activation"),
    (dict(norm_layer="instance"), TypeError, "norm_layer"),
])
def test_bad_arguments_raise(kw, err, arg):
    args = dict(input_dim=4, output_dim=6, kernel_size=3)
    args.update(kw)
    with pytest.raises(err, match=rf"^\[KANConv2DLayer\] {arg}: "):
        compat.KANConv2DLayer(**args)


def test_bad_input_raises():
    layer = compat.KANConv2DLayer(4, 6, 3)
    for x in (torch.randn(2, 3, 5, 5), torch.randn(4, 5, 5)):
        with pytest.raises(ValueError, match=r"^\[KANConv2DLayer\] input: "):
            layer(x)
    with pytest.raises(TypeError, match=r"^\[KANConv2DLayer\] input: "):
        layer(torch.randn(2, 4, 5, 5, dtype=torch.float64))


@pytest.mark.skipif(importlib.util.find_spec("kan_convs") is None, reason="torch-conv-kan is not installed")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_oracle_is_torch_conv_kan(rng, dtype):
    """Where torch-conv-kan itself is installed: the oracle's draws and numbers are bitwise its own."""
    from kan_convs import KANConv2DLayer as Theirs

    seed, kw = _seed(rng), dict(groups=2, padding=1, dropout=0.2, affine=True)
    mods = []
    for cls in (Theirs, ref_mod.KANConv2DLayer):
        torch.manual_seed(seed)
        mods.append(cls(4, 6, 3, **kw).to(dtype))
    x = torch.randn(2, 4, 6, 6, generator=rng, dtype=dtype)
    got, want = (_forward_and_grads_default(m, x, seed) for m in mods)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
