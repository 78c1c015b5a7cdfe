"""swisk.nn layers: bad arguments raise ValueError/TypeError naming the layer and its own argument, and a
failing update_grid leaves the layer bitwise unchanged."""
import warnings

import pytest
import torch

from swisk import reference
from swisk.nn import KAN, KANLinear, WaveletKAN, WaveletKANLinear

CONSTRUCTOR_ERRORS = [
    # (layer, args, kwargs, exception, message)
    (KANLinear, (4, 3), dict(grid_size=0), ValueError, r"\[KANLinear\] grid_size: must be >= 1, got 0"),
    (KANLinear, (4, 3), dict(grid_size=-2), ValueError, r"\[KANLinear\] grid_size: must be >= 1, got -2"),
    (KANLinear, (4, 3), dict(grid_size=2.5), TypeError, r"\[KANLinear\] grid_size: expected an int, got float"),
    (KANLinear, (0, 3), {}, ValueError, r"\[KANLinear\] in_features: must be >= 1, got 0"),
    (KANLinear, (4, -1), {}, ValueError, r"\[KANLinear\] out_features: must be >= 1, got -1"),
    (KANLinear, ("4", 3), {}, TypeError, r"\[KANLinear\] in_features: expected an int, got str"),
    (KANLinear, (4, 3), dict(spline_order=-1), ValueError, r"\[KANLinear\] spline_order: must be in 0\.\.\d+, got -1"),
    (KANLinear, (4, 3), dict(spline_order=99), ValueError, r"\[KANLinear\] spline_order: must be in 0\.\.\d+, got 99"),
    (KANLinear, (4, 3), dict(grid_range=[1, -1]), ValueError, r"\[KANLinear\] grid_range: must be increasing"),
    (KANLinear, (4, 3), dict(grid_range=[0.5, 0.5]), ValueError, r"\[KANLinear\] grid_range: must be increasing"),
    (KANLinear, (4, 3), dict(grid_range=[-1, 0, 1]), TypeError, r"\[KANLinear\] grid_range: expected a pair"),
    (KANLinear, (4, 3), dict(grid_range=[-1, float("inf")]), ValueError, r"\[KANLinear\] grid_range: must be finite"),
    (KANLinear, (4, 3), dict(grid_eps=1.5), ValueError, r"\[KANLinear\] grid_eps: must be in \[0\.0, 1\.0\]"),
    (KANLinear, (4, 3), dict(scale_noise=float("nan")), ValueError, r"\[KANLinear\] scale_noise: must be finite"),
    (KANLinear, (4, 3), dict(scale_base="1"), TypeError, r"\[KANLinear\] scale_base: expected a real number"),
    (KANLinear, (4, 3), dict(base_activation=torch.nn.SiLU()), TypeError,
     r"\[KANLinear\] base_activation: expected a class .* not an instance"),
    (KANLinear, (4, 3), dict(enable_standalone_scale_spline="yes"), TypeError,
     r"\[KANLinear\] enable_standalone_scale_spline: expected a bool"),
    (KAN, ([4],), {}, ValueError, r"\[KAN\] layers_hidden: needs at least two widths \[in, \.\.\., out\], got \[4\]"),
    (KAN, ([],), {}, ValueError, r"\[KAN\] layers_hidden: needs at least two widths"),
    (KAN, (4,), {}, TypeError, r"\[KAN\] layers_hidden: expected a sequence of ints, got int"),
    (KAN, ([4, 0, 2],), {}, ValueError, r"\[KAN\] layers_hidden\[1\]: must be >= 1, got 0"),
    (KAN, ([4, 2],), dict(grid_size=0), ValueError, r"\[KAN\] grid_size: must be >= 1, got 0"),
    (KAN, ([4, 2],), dict(spline_order=-1), ValueError, r"\[KAN\] spline_order: must be in"),
    (KAN, ([4, 2],), dict(grid_range=(2, 1)), ValueError, r"\[KAN\] grid_range: must be increasing"),
    (WaveletKANLinear, (0, 3), {}, ValueError, r"\[WaveletKANLinear\] in_features: must be >= 1, got 0"),
    (WaveletKANLinear, (4, -3), {}, ValueError, r"\[WaveletKANLinear\] out_features: must be >= 1, got -3"),
    (WaveletKANLinear, (4, 3), dict(wavelet_type="haar"), ValueError,
     r"\[WaveletKANLinear\] wavelet_type: unknown wavelet 'haar'; valid: mexican_hat"),
    (WaveletKANLinear, (4, 3), dict(wavelet_type=None), TypeError,
     r"\[WaveletKANLinear\] wavelet_type: expected a str"),
    (WaveletKANLinear, (4, 3), dict(batch_norm="no"), TypeError, r"\[WaveletKANLinear\] batch_norm: expected a bool"),
    (WaveletKANLinear, (4, 3), dict(base_activation=torch.nn.SiLU), TypeError,
     r"\[WaveletKANLinear\] base_activation: .* \(pass an instance, e\.g\. SiLU\(\)\)"),
    (WaveletKANLinear, (4, 3), dict(base_activation=3), TypeError,
     r"\[WaveletKANLinear\] base_activation: expected None or a callable"),
    (WaveletKAN, ([4],), {}, ValueError, r"\[WaveletKAN\] layers_hidden: needs at least two widths"),
    (WaveletKAN, ([4, -1],), {}, ValueError, r"\[WaveletKAN\] layers_hidden\[1\]: must be >= 1, got -1"),
    (WaveletKAN, ([4, 2],), dict(wavelet_type="bump"), ValueError, r"\[WaveletKAN\] wavelet_type: unknown wavelet"),
]


@pytest.mark.parametrize("cls,args,kwargs,exc,match", CONSTRUCTOR_ERRORS,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CONSTRUCTOR_ERRORS)])
def test_constructor_errors(cls, args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cls(*args, **kwargs)


def test_valid_edge_arguments_construct(rng):
    """The boundaries of the checks stay accepted: one feature, grid_size 1, grid_eps 0 and 1, tuples."""
    x = torch.rand(6, 1, generator=rng) * 1.8 - 0.9
    for kw in (dict(grid_size=1), dict(grid_eps=0.0), dict(grid_eps=1), dict(grid_range=(-1.0, 1))):
        m = KANLinear(1, 1, **kw)
        want = reference.kan_linear(x, m.grid, m.base_weight, m.spline_weight, m.spline_scaler, 3)
        torch.testing.assert_close(m(x), want, atol=2e-5, rtol=1e-5)
    assert len(KAN((1, 1)).layers) == 1 and len(WaveletKAN((1, 1)).layers) == 1


def _layers():
    return [KANLinear(8, 3), KANLinear(8, 3, base_activation=torch.nn.GELU), WaveletKANLinear(8, 3),
            WaveletKANLinear(8, 3, "morlet", batch_norm=False)]


@pytest.mark.parametrize("i", range(4))
def test_forward_input_errors(rng, i):
    """The layer names its own input (not the op's grid/scale/weight) for shape, dtype and device."""
    layer = _layers()[i]
    name = type(layer).__name__
    x = torch.randn(4, 8, generator=rng)
    with pytest.raises(ValueError, match=rf"\[{name}\] input: expected last dimension in_features=8, got 5"):
        layer(torch.randn(4, 5, generator=rng))
    with pytest.raises(ValueError, match=rf"\[{name}\] input: expected last dimension in_features=8, got a 0-d"):
        layer(x[0, 0])
    msg = rf"\[{name}\] input: dtype torch.float64 differs from the layer's torch.float32"
    with pytest.raises(TypeError, match=msg):
        layer(x.double())
    with pytest.raises(TypeError, match=rf"\[{name}\] input: dtype torch.int32 is not supported"):
        layer(x.int())
    with pytest.raises(TypeError, match=rf"\[{name}\] input: expected a torch.Tensor, got list"):
        layer(x.tolist())
    with pytest.raises(ValueError, match=rf"\[{name}\] input: on device meta, but the layer is on cpu"):
        layer(torch.empty(4, 8, device="meta"))
    want = layer(x)  # and the layer still works
    assert want.shape == (4, 3) and torch.isfinite(want).all()


@pytest.mark.parametrize("i", range(4))
def test_layer_on_unsupported_dtype_and_on_meta(rng, i):
    name = type(_layers()[i]).__name__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "complex modules are a new feature"
        layer = _layers()[i].to(torch.complex64)
    with pytest.raises(TypeError, match=rf"\[{name}\] dtype: the layer's parameters are torch.complex64"):
        layer(torch.randn(4, 8, generator=rng).to(torch.complex64))
    layer = _layers()[i].to("meta")  # meta: shapes only, as the CPU's (tests/test_meta.py)
    assert layer(torch.empty(4, 8, device="meta")).shape == _layers()[i](torch.randn(4, 8, generator=rng)).shape


def test_autocast_input_still_accepted(rng):
    """Under autocast a bf16 input into an fp32 layer is the ops' business (they cast), not an error."""
    for layer in (KANLinear(6, 2), WaveletKANLinear(6, 2, batch_norm=False)):
        x = torch.randn(5, 6, generator=rng)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = layer(x.bfloat16())
        torch.testing.assert_close(got.float(), layer(x.bfloat16().float()), atol=0.1, rtol=0.05)


def _snapshot(m):
    """Every parameter and buffer as raw bytes (NaN compares equal to itself)."""
    return {k: v.detach().clone().contiguous().view(torch.uint8) for k, v in m.state_dict().items()}


def _assert_unchanged(m, before):
    after = _snapshot(m)
    assert after.keys() == before.keys()
    for k in before:
        assert torch.equal(after[k], before[k]), f"{k} changed by a raising update_grid"


@pytest.mark.parametrize("arg", ["spline_weight", "spline_scaler"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_update_grid_refuses_non_finite_weights(rng, arg, bad):
    torch.manual_seed(rng.initial_seed())
    m = KANLinear(4, 3)
    with torch.no_grad():
        getattr(m, arg).view(-1)[int(torch.randint(0, getattr(m, arg).numel(), (1,), generator=rng))] = bad
    before = _snapshot(m)
    with pytest.raises(ValueError, match=rf"\[KANLinear\] update_grid: {arg} holds NaN or inf"):
        m.update_grid(torch.randn(64, 4, generator=rng))
    _assert_unchanged(m, before)


def test_update_grid_is_atomic(rng):
    """Every raising call, whatever the cause, leaves the knots and weights bitwise as they were."""
    torch.manual_seed(rng.initial_seed())
    m = KANLinear(4, 3, grid_eps=0.0)
    before = _snapshot(m)
    x = torch.randn(64, 4, generator=rng)
    cases = [
        (x.clone().index_fill_(0, torch.tensor([5]), float("nan")), ValueError, r"update_grid: x holds NaN or inf"),
        (x[:, :3], ValueError, r"input: expected last dimension in_features=4, got 3"),
        (x.reshape(32, 8), ValueError, r"input: expected last dimension in_features=4, got 8"),
        (x[:0], ValueError, r"update_grid: x holds no samples"),
        (x.double(), TypeError, r"input: dtype torch.float64 differs"),
        # grid_eps = 0 and a few repeated values: the adaptive knots collapse
        (x[:2].repeat(32, 1), ValueError, r"update_grid: the new knots are not strictly increasing"),
    ]
    for bad, exc, match in cases:
        with pytest.raises(exc, match=r"\[KANLinear\] " + match):
            m.update_grid(bad)
        _assert_unchanged(m, before)
    with pytest.raises(ValueError, match=r"\[KANLinear\] margin: must be >= 0.0"):
        m.update_grid(x, margin=-1.0)
    _assert_unchanged(m, before)
    m.update_grid(x)  # a good call still updates
    assert not torch.equal(m.grid, before["grid"].view(torch.float32).reshape(m.grid.shape))
    y = m(x)
    want = reference.kan_linear(x, m.grid, m.base_weight, m.spline_weight, m.spline_scaler, 3)
    torch.testing.assert_close(y, want, atol=2e-5, rtol=1e-5)


def test_kan_forward_with_update_grid_rejects_nan_weights(rng):
    torch.manual_seed(rng.initial_seed())
    net = KAN([3, 5, 2])
    with torch.no_grad():
        net.layers[1].spline_weight[0, 0, 0] = float("nan")
    before = _snapshot(net)
    with pytest.raises(ValueError, match=r"\[KANLinear\] update_grid: spline_weight holds NaN or inf"):
        net(torch.randn(32, 3, generator=rng), update_grid=True)
    # the first layer was updated before the second raised; the second is untouched
    after = _snapshot(net)
    assert all(torch.equal(after[k], before[k]) for k in before if k.startswith("layers.1."))
