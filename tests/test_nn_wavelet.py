"""swisk.nn.WaveletKANLinear / WaveletKAN against swisk.reference.wavelet's Wav-KAN oracle layers
(tests/test_compat_wav_kan.py covers the Wav-KAN surface: init draws, state_dicts, training)."""
import math

import pytest
import torch
from torch import nn

import swisk
from swisk import reference
from swisk.reference.wavelet import WavKANLinearRef, WavKANRef

WAVELETS = list(reference.WAVELETS)


def randomise(module, rng):
    """Move every parameter and BN buffer off its initial value (scales kept away from 0)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=rng, dtype=torch.float64).to(p.dtype)
            p.copy_(1 + 0.3 * noise if name.endswith("scale") and "bn" not in name else noise * 0.5)
        for name, b in module.named_buffers():
            if name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=rng, dtype=torch.float64) + 0.5)
            elif name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=rng, dtype=torch.float64) * 0.1)


@pytest.mark.parametrize("wavelet", WAVELETS)
def test_layer_matches_wavkan(backend, rng, wavelet):
    """The layer in fp64 / fp32 against the fp64 oracle holding the same (rounded) weights."""
    source = WavKANLinearRef(13, 6, wavelet).double()
    randomise(source, rng)
    x64 = torch.randn(17, 13, generator=rng, dtype=torch.float64) * 1.2
    go = torch.randn(17, 6, generator=rng, dtype=torch.float64)
    dtypes = [torch.float64, torch.float32] if backend == "cpu" else [torch.float32]
    for dtype in dtypes:
        rounded = {k: v.to(dtype).to(v.dtype) for k, v in source.state_dict().items()}
        oracle = WavKANLinearRef(13, 6, wavelet).double()
        oracle.load_state_dict(rounded)
        layer = swisk.nn.WaveletKANLinear(13, 6, wavelet).to(dtype)
        layer.load_state_dict(source.state_dict())  # Wav-KAN's keys, weight1 included
        x = x64.to(dtype)
        tol = 1e-12 if dtype == torch.float64 else 1e-5
        for mode in ("train", "eval"):
            oracle.train(mode == "train"), layer.train(mode == "train")
            xo, xl = x.double().requires_grad_(), x.clone().requires_grad_()
            want, got = oracle(xo), layer(xl)
            assert ((got.double() - want).abs().max() / want.abs().max()).item() <= tol, (mode, dtype)
            gw = torch.autograd.grad(want, [xo, oracle.scale, oracle.translation, oracle.wavelet_weights], go)
            gl = torch.autograd.grad(got, [xl, layer.scale, layer.translation, layer.wavelet_weights], go.to(dtype))
            for a, b in zip(gl, gw):
                assert ((a.double() - b).abs().max() / b.abs().max()).item() <= tol * 20, (mode, dtype)
        torch.testing.assert_close(layer.bn.running_mean.double(), oracle.bn.running_mean, rtol=tol, atol=tol)


def test_init_and_names():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        layer = swisk.nn.WaveletKANLinear(40, 7)
    assert [n for n, _ in layer.named_parameters()] == ["scale", "translation", "weight1", "wavelet_weights",
                                                        "bn.weight", "bn.bias"]
    assert isinstance(layer.base_activation, nn.SiLU) and not layer.base_branch
    assert torch.equal(layer.scale, torch.ones(7, 40)) and torch.equal(layer.translation, torch.zeros(7, 40))
    bound = 1 / math.sqrt(40)  # kaiming uniform with a = sqrt(5)
    for w in (layer.wavelet_weights, layer.weight1):
        assert w.abs().max() <= bound and w.abs().max() > 0.8 * bound and w.std() > 0.4 * bound
    assert not torch.equal(layer.wavelet_weights, layer.weight1)
    plain = swisk.nn.WaveletKANLinear(4, 3, "dog", batch_norm=False)
    assert plain.bn is None and "bn.weight" not in plain.state_dict() and "weight1" in plain.state_dict()


def test_weight1_unused_without_base_branch(rng):
    """As in Wav-KAN's forward, weight1 changes nothing and gets no gradient."""
    layer = swisk.nn.WaveletKANLinear(5, 4, "dog").double()
    randomise(layer, rng)
    x = torch.randn(9, 5, generator=rng, dtype=torch.float64)
    y = layer(x)
    with torch.no_grad():
        layer.weight1.normal_(generator=rng)
    torch.testing.assert_close(layer(x), y, atol=0, rtol=0)
    layer(x).square().sum().backward()
    assert layer.weight1.grad is None and layer.wavelet_weights.grad is not None


def test_base_branch_uses_weight1(rng):
    oracle = WavKANLinearRef(5, 4, "morlet").double()
    randomise(oracle, rng)
    sd = oracle.state_dict()
    layer = swisk.nn.WaveletKANLinear(5, 4, "morlet", base_activation=nn.GELU()).double()
    layer.load_state_dict(sd)
    assert layer.base_branch and isinstance(layer.base_activation, nn.GELU)
    layer.eval(), oracle.eval()
    x = torch.randn(9, 5, generator=rng, dtype=torch.float64)
    base = torch.nn.functional.linear(torch.nn.functional.gelu(x), sd["weight1"])
    bn = oracle.bn
    want = oracle(x) + base * bn.weight / torch.sqrt(bn.running_var + bn.eps)  # BN is affine in eval
    torch.testing.assert_close(layer(x), want, atol=1e-12, rtol=0)
    layer(x).sum().backward()
    assert layer.weight1.grad is not None and layer.weight1.grad.abs().max() > 0


def test_leading_dims_without_batch_norm(backend, rng):
    layer = swisk.nn.WaveletKANLinear(6, 5, "meyer", batch_norm=False)
    randomise(layer, rng)
    x = torch.randn(2, 3, 6, generator=rng) * 0.8
    want = reference.wavelet_kan(x, layer.scale, layer.translation, layer.wavelet_weights, "meyer")
    torch.testing.assert_close(layer(x), want, atol=1e-5, rtol=0)
    assert layer(x[0, 0]).shape == (5,)


def test_network_state_dict(rng):
    net = swisk.nn.WaveletKAN([6, 8, 3], wavelet_type="shannon")
    oracle = WavKANRef([6, 8, 3], wavelet_type="shannon")
    assert list(net.state_dict()) == list(oracle.state_dict())
    randomise(oracle, rng)
    net.load_state_dict(oracle.state_dict())
    net, oracle = net.double(), oracle.double()  # two layers and batch statistics: compared in fp64
    x = torch.randn(16, 6, generator=rng, dtype=torch.float64)
    torch.testing.assert_close(net(x), oracle(x), atol=1e-10, rtol=1e-10)


def test_bad_wavelet_type():
    msg = r"\[WaveletKANLinear\] wavelet_type: unknown wavelet 'bump'; valid: mexican_hat"
    with pytest.raises(ValueError, match=msg):
        swisk.nn.WaveletKANLinear(3, 2, "bump")


@pytest.mark.parametrize("wavelet,batch_norm", [("dog", False), ("shannon", True)])
def test_compile_layer(rng, wavelet, batch_norm):
    layer = swisk.nn.WaveletKANLinear(6, 4, wavelet, batch_norm=batch_norm).eval()
    randomise(layer, rng)
    f = torch.compile(layer, fullgraph=True)
    x = torch.randn(5, 6, generator=rng)
    torch.testing.assert_close(f(x), layer(x))
