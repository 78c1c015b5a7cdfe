"""Regressions of the CUDA backend's launch paths, run on cuda-emu (the same cuda/*.cu entry points on
the CPU emulator) and on the host: empty dimensions, runtime facts and what backends() reports."""
import math

import pytest
import torch

import swisk
from swisk import _backend, testing


@pytest.fixture
def poisoned_outputs(monkeypatch):
    """torch.empty / empty_like hand out NaN-filled memory, so an output the kernels skip shows."""
    empty, empty_like = torch.empty, torch.empty_like

    def nan_empty(*a, **kw):
        t = empty(*a, **kw)
        return t.fill_(math.nan) if t.is_floating_point() else t

    def nan_empty_like(*a, **kw):
        t = empty_like(*a, **kw)
        return t.fill_(math.nan) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", nan_empty)
    monkeypatch.setattr(torch, "empty_like", nan_empty_like)


def _kan_inputs(rows, n_in, n_out, grid_size=5, order=3, dtype=torch.float32):
    g = torch.linspace(-1, 1, grid_size + 1, dtype=dtype)
    h = g[1] - g[0]
    knots = torch.cat([g[0] - h * torch.arange(order, 0, -1, dtype=dtype), g, g[-1] + h * torch.arange(1, order + 1, dtype=dtype)])
    x = torch.randn(rows, n_in, dtype=dtype, requires_grad=True)
    grid = knots.expand(n_in, -1).contiguous()
    bw = torch.randn(n_out, n_in, dtype=dtype, requires_grad=True)
    sw = torch.randn(n_out, n_in, grid_size + order, dtype=dtype, requires_grad=True)
    sc = torch.randn(n_out, n_in, dtype=dtype, requires_grad=True)
    return x, grid, bw, sw, sc


HOSTS = ["cpu", "cuda-emu", "metal-emu"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("backend", HOSTS)
def test_kan_backward_with_no_outputs_gives_zero_grad_x(poisoned_outputs, dtype, backend):
    x, grid, bw, sw, sc = _kan_inputs(6, 4, 0, dtype=dtype)
    with testing.backend(backend):
        y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        assert y.shape == (6, 0)
        (gx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    assert torch.equal(gx, torch.zeros_like(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("backend", HOSTS)
def test_kan_forward_with_no_inputs_gives_zeros(poisoned_outputs, dtype, backend):
    x, grid, bw, sw, sc = _kan_inputs(6, 0, 3, dtype=dtype)
    with testing.backend(backend):
        y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        gbw, gsw = torch.autograd.grad(y, [bw, sw], torch.ones_like(y))
    assert torch.equal(y, torch.zeros(6, 3, dtype=dtype))
    assert gbw.shape == (3, 0) and gsw.shape == (3, 0, 8)


@pytest.mark.parametrize("backend", HOSTS)
def test_empty_sums_are_zero(poisoned_outputs, backend):
    """No rows: parameter gradients are zero; no features: the wavelet layer's output is zero."""
    x, grid, bw, sw, sc = _kan_inputs(0, 4, 3)
    s, t, w = torch.rand(3, 4) + 0.5, torch.randn(3, 4), torch.randn(3, 4)
    with testing.backend(backend):
        y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        grads = torch.autograd.grad(y, [bw, sw, sc], torch.ones_like(y))
        assert all(torch.equal(g, torch.zeros_like(g)) for g in grads)
        xw = torch.randn(5, 0)
        yw = swisk.ops.wavelet_kan(xw, s[:, :0], t[:, :0], w[:, :0], "dog")
        assert torch.equal(yw, torch.zeros(5, 3))


def test_build_info_reports_cuda_runtime_facts():
    info = swisk.build_info()
    for key in ("cuda_driver_version", "cuda_runtime_version", "cuda_unusable_reason"):
        assert key in info
    if not info["cuda_compiled"]:
        assert info["cuda_unusable_reason"] == "swisk was built without the CUDA backend"
        assert not swisk.backends()["cuda"]


def test_cuda_usable_is_false_with_a_reason(monkeypatch):
    """An old driver: CUDA compiled and torch sees a GPU, but swisk's runtime cannot run there."""
    info = dict(swisk.build_info(), cuda_compiled=True, cuda_driver_version=12040, cuda_runtime_version=13000,
                cuda_unusable_reason="the NVIDIA driver supports CUDA 12.4 but swisk's CUDA runtime is 13.0")
    monkeypatch.setattr(_backend._C, "build_info", lambda: info)
    monkeypatch.setattr(_backend._C, "cuda_device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _backend.cuda_usable() is False
    info["cuda_unusable_reason"] = ""
    assert _backend.cuda_usable() is True


def test_info_shows_why_cuda_is_unusable(capsys):
    from swisk.__main__ import info

    assert info() == 0
    out = capsys.readouterr().out
    assert "cuda_unusable_reason:" in out and "cuda_driver_version:" in out
