"""The meta device (shapes without data, as efficient-kan allows): layers built under
torch.device("meta") run forward and backward on meta tensors, to_empty + reset_parameters make them
real, and the ops give the CPU's shapes on meta inputs and still reject bad ones."""
import warnings

import pytest
import torch

import swisk
from swisk import nn as snn

LAYERS = {  # name: (constructor, input shape)
    "KANLinear": (lambda: snn.KANLinear(8, 4), (3, 8)),
    "KAN": (lambda: snn.KAN([8, 6, 4]), (3, 8)),
    "WaveletKANLinear": (lambda: snn.WaveletKANLinear(8, 4), (3, 8)),
    "WaveletKAN": (lambda: snn.WaveletKAN([8, 6, 4]), (3, 8)),
    "KANConv1d": (lambda: snn.KANConv1d(4, 6, 3, padding=1), (2, 4, 9)),
    "KANConv2d": (lambda: snn.KANConv2d(4, 6, 3, padding=1, stride=2), (2, 4, 9, 9)),
    "KANConv3d": (lambda: snn.KANConv3d(4, 6, 3), (2, 4, 5, 5, 5)),
    "SKLinear": (lambda: snn.SKLinear(8, 4, num_terms=2, low_rank=2), (3, 8)),
    "SKLinear seeded": (lambda: snn.SKLinear(8, 4, num_terms=2, low_rank=2, seed=3), (3, 8)),
    "SKLinear srht": (lambda: snn.SKLinear(8, 4, num_terms=2, low_rank=2, operator="srht"), (3, 8)),
    "SKConv2d": (lambda: snn.SKConv2d(4, 6, 3, num_terms=2, low_rank=2, padding=1), (2, 4, 9, 9)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_on_meta(name):
    make, shape = LAYERS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SKLinear's "more parameters than a dense layer"
        cpu = make()
        with torch.device("meta"):
            meta = make()
    assert all(p.is_meta for p in meta.parameters())
    assert [(n, p.shape) for n, p in meta.named_parameters()] == [(n, p.shape) for n, p in cpu.named_parameters()]
    x = torch.randn(shape)
    want = cpu(x)
    want.sum().backward()
    got = meta(x.to("meta"))
    assert got.is_meta and got.shape == want.shape and got.dtype == want.dtype
    got.sum().backward()
    for (n, p), (_, q) in zip(meta.named_parameters(), cpu.named_parameters()):
        assert (p.grad is None) == (q.grad is None), n
        assert p.grad is None or (p.grad.is_meta and p.grad.shape == q.grad.shape), n
    # made real as large models are: to_empty, then the weights and buffers (knots) of a state_dict
    meta.to_empty(device="cpu")
    meta.load_state_dict(cpu.state_dict())
    cpu.eval(), meta.eval()  # batch norm: running statistics, not the batch's
    torch.testing.assert_close(meta(x), cpu(x), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["KANLinear", "KAN", "KANConv1d", "KANConv2d", "KANConv3d"])
def test_deferred_initialisation(name):
    """Built on meta, to_empty, then reset_parameters (torch's deferred initialisation): the knots are
    the constructor's again (to_empty leaves them unset), the layer as one built on the CPU with the
    same random draws."""
    make, shape = LAYERS[name]
    torch.manual_seed(5)
    cpu = make()
    with torch.device("meta"):
        meta = make()
    meta.to_empty(device="cpu")
    for b in meta.buffers():
        b.fill_(float("nan"))  # what to_empty may leave
    torch.manual_seed(5)
    for m in meta.modules():
        if hasattr(m, "grid"):
            m.reset_parameters()
    # (the least-squares fit's rounding may follow the memory it runs in: fp32 tolerances)
    torch.testing.assert_close(dict(meta.state_dict()), dict(cpu.state_dict()), rtol=1e-5, atol=1e-7)
    x = torch.randn(shape)
    torch.testing.assert_close(meta(x), cpu(x))


def _meta_calls():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(5, 3, generator=g) * 2 - 1
    grid = torch.linspace(-1.6, 1.6, 12).expand(3, 12).contiguous()
    bw, sw, sc = torch.randn(4, 3, generator=g), torch.randn(4, 3, 8, generator=g), torch.randn(4, 3, generator=g)
    calls = [
        (swisk.ops.bspline_basis, (x, grid, 3), {}),
        (swisk.ops.kan_expand, (x, grid, 3), {}),
        (swisk.ops.kan_linear, (x, grid, bw, sw, sc, 3), {}),
        (swisk.ops.wavelet_kan, (x, torch.rand(4, 3, generator=g) + 0.5, torch.randn(4, 3, generator=g),
                                 torch.randn(4, 3, generator=g), "mexican_hat"), {}),
        (swisk.ops.fwht, (torch.randn(3, 16, generator=g), 0.25), {}),
        (swisk.ops.srht, (torch.randn(3, 20, generator=g), 5, 7), {}),
        (swisk.ops.sketch, (torch.randn(3, 20, generator=g), "gaussian", 5, 7), {}),
        (swisk.ops.srht_sketched_linear, (torch.randn(3, 20, generator=g), torch.randn(2, 20, 3, generator=g),
                                          torch.randn(2, 3, 6, generator=g), 7), {}),
        (swisk.ops.kan_conv2d, (torch.randn(2, 3, 6, 6, generator=g), grid, torch.randn(4, 3, 3, 3, generator=g),
                                torch.randn(4, 24, 3, 3, generator=g), None, 3), {"padding": 1}),
    ]
    return calls


def test_ops_on_meta_give_the_cpu_shapes():
    for fn, args, kw in _meta_calls():
        want = fn(*args, **kw)
        margs = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in args]
        got = fn(*margs, **kw)
        assert got.is_meta and got.shape == want.shape and got.dtype == want.dtype, fn.__name__


def test_one_input_on_meta_is_an_error():
    """A meta tensor among real ones has no data to read: a clear error naming the op and the argument
    (it was read as absent, or from address 0)."""
    for fn, args, kw in _meta_calls():
        if sum(isinstance(a, torch.Tensor) for a in args) < 2:
            continue
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                margs = [a.to("meta") if j == i else b for j, b in enumerate(args)]
                with pytest.raises(ValueError, match=r"^\[[a-z_0-9]+\] [A-Za-z_0-9]+: .*meta"):
                    fn(*margs, **kw)


def test_bad_input_on_meta_is_still_an_error():
    with pytest.raises(ValueError, match=r"\[fwht\] x: the last dimension must be a power of two"):
        swisk.ops.fwht(torch.empty(3, 12, device="meta"))
    grid = torch.linspace(-1, 1, 12).expand(3, 12).to("meta")
    with pytest.raises(ValueError, match=r"\[kan_linear\]"):
        swisk.ops.kan_linear(torch.empty(5, 3, device="meta"), grid, torch.empty(4, 2, device="meta"),
                             torch.empty(4, 3, 8, device="meta"), None, 3)
