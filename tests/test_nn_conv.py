"""swisk.nn.KANConv1d/2d/3d: efficient-kan's parameterisation per patch element on kan_conv{1,2,3}d."""
import math

import pytest
import torch

import swisk
from swisk import reference

F64 = torch.float64
LAYERS = {1: swisk.nn.KANConv1d, 2: swisk.nn.KANConv2d, 3: swisk.nn.KANConv3d}


def _ref(layer, x, act=None):
    """The layer's function in plain torch: the formulation on the layer's own parameters."""
    d = layer.d
    pad = layer.padding
    if pad == "same":
        pads = []
        for dil, k in zip(layer.dilation, layer.kernel_size):
            pads += [dil * (k - 1) // 2, dil * (k - 1) - dil * (k - 1) // 2]
    elif pad == "valid":
        pads = [0] * (2 * d)
    else:
        pads = [v for p in pad for v in (p, p)]
    scaler = layer.spline_scaler if layer.enable_standalone_scale_spline else None
    bw = layer.base_weight if act is not None else None
    y = reference.kan_conv(x, layer.grid, bw, layer.spline_weight, scaler, layer.spline_order, list(layer.stride),
                           pads, list(layer.dilation), layer.groups, act or "silu")
    return y


@pytest.mark.parametrize("d,kw", [(1, dict(stride=2, padding=1)), (2, dict(padding="same", dilation=2)),
                                  (2, dict(groups=2, stride=(1, 2), padding=(1, 0))), (3, dict(padding=1))])
def test_layer_matches_formulation(rng, d, kw):
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=rng)))
    layer = LAYERS[d](4, 6, 3, **kw).double()
    with torch.no_grad():
        layer.spline_weight.normal_()  # the init's weights are tiny: test the spline branch at size
    x = torch.randn(2, 4, *(7,) * d, generator=rng, dtype=F64)
    y = layer(x)
    want = _ref(layer, x, "silu")
    torch.testing.assert_close(y, want, rtol=1e-11, atol=1e-11)
    y.square().sum().backward()
    grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    _ref(layer, x, "silu").square().sum().backward()
    for a, p in zip(grads, layer.parameters()):
        torch.testing.assert_close(a, p.grad, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("act,name", [(torch.nn.GELU, "gelu"), (torch.nn.Identity, "identity"), (torch.nn.Tanh, None)])
def test_base_activations(rng, act, name):
    layer = swisk.nn.KANConv2d(3, 5, 3, padding=1, base_activation=act).double()
    x = torch.randn(2, 3, 6, 6, generator=rng, dtype=F64)
    if name is None:  # any other module: its base branch in torch, the spline branch on the op
        want = _ref(layer, x) + torch.nn.functional.conv2d(torch.tanh(x), layer.base_weight, None, 1, 1)
    else:
        want = _ref(layer, x, name)
    torch.testing.assert_close(layer(x), want, rtol=1e-11, atol=1e-11)
    # several leading dims, and none (unbatched), as the fused activations take them
    x2 = torch.randn(2, 2, 3, 6, 6, generator=rng, dtype=F64)
    torch.testing.assert_close(layer(x2), layer(x2.flatten(0, 1)).unflatten(0, (2, 2)), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(layer(x[0]), layer(x[:1])[0], rtol=1e-12, atol=1e-12)


def test_parameters_and_initialisation():
    torch.manual_seed(0)
    layer = swisk.nn.KANConv2d(8, 16, (3, 5), groups=2, grid_size=5, spline_order=3)
    names = {n: tuple(p.shape) for n, p in layer.named_parameters()}
    assert names == {"base_weight": (16, 4, 3, 5), "spline_weight": (16, 32, 3, 5), "spline_scaler": (16, 4, 3, 5)}
    assert tuple(layer.grid.shape) == (8, 12) and "grid" in layer.state_dict()
    bound = 1 / math.sqrt(4 * 15)  # kaiming-uniform with a = sqrt(5): 1/sqrt(fan_in)
    assert layer.base_weight.abs().max() <= bound and layer.base_weight.abs().max() > 0.8 * bound
    assert 0 < layer.spline_weight.abs().max() < 0.1  # a fit to noise of 0.1/grid_size
    plain = swisk.nn.KANConv2d(8, 16, 3, enable_standalone_scale_spline=False)
    assert "spline_scaler" not in dict(plain.named_parameters())


def test_training_step_and_compile(rng):
    torch.manual_seed(1)
    net = torch.nn.Sequential(swisk.nn.KANConv2d(1, 4, 3, padding=1), swisk.nn.KANConv2d(4, 2, 3, stride=2))
    x = torch.randn(8, 1, 9, 9, generator=rng)
    target = torch.randn(8, 2, 4, 4, generator=rng)
    opt = torch.optim.Adam(net.parameters(), lr=3e-2)
    losses = []
    for _ in range(15):
        loss = (net(x) - target).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
    compiled = torch.compile(net, fullgraph=True)
    torch.testing.assert_close(compiled(x), net(x))
    reg = net[0].regularization_loss()
    assert reg.isfinite() and reg > 0


def test_bad_arguments_and_inputs():
    cases = [
        (lambda: swisk.nn.KANConv2d(3, 4, 3, groups=2), ValueError, r"\[KANConv2d\] groups"),
        (lambda: swisk.nn.KANConv2d(4, 4, 0), ValueError, r"\[KANConv2d\] kernel_size"),
        (lambda: swisk.nn.KANConv2d(4, 4, (3, 3, 3)), TypeError, r"\[KANConv2d\] kernel_size"),
        (lambda: swisk.nn.KANConv2d(4, 4, 3, padding="full"), ValueError, r"\[KANConv2d\] padding"),
        (lambda: swisk.nn.KANConv2d(4, 4, 3, stride=2, padding="same"), ValueError, r"\[KANConv2d\] padding"),
        (lambda: swisk.nn.KANConv1d(4, 4, 3, grid_size=0), ValueError, r"\[KANConv1d\] grid_size"),
        (lambda: swisk.nn.KANConv3d(0, 4, 3), ValueError, r"\[KANConv3d\] in_channels"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()
    layer = swisk.nn.KANConv2d(4, 4, 3)
    with pytest.raises(ValueError, match=r"\[KANConv2d\] input"):
        layer(torch.randn(1, 3, 5, 5))
    with pytest.raises(TypeError, match=r"\[KANConv2d\] input"):
        layer(torch.randn(1, 4, 5, 5, dtype=F64))
    with pytest.raises(ValueError, match=r"\[kan_conv2d\] x"):
        layer(torch.randn(1, 4, 2, 2))
