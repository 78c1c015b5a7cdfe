"""torch.func and forward mode through every op: grad, jacrev, vmap and per-sample gradients equal
autograd's; what has no formula yet (forward mode, double backward) raises instead of a silent zero."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import swisk

D = torch.float64


def _cases(rng):
    r = lambda *s: torch.randn(*s, generator=rng, dtype=D)  # noqa: E731
    grid = torch.linspace(-2.2, 2.2, 12, dtype=D).expand(4, -1).contiguous()
    bw, sw, sc = r(3, 4), r(3, 4, 8), r(3, 4)
    s, t = torch.rand(3, 4, generator=rng, dtype=D) + 0.5, r(3, 4)
    return {
        "kan_linear": lambda x: swisk.ops.kan_linear(x, grid, bw, sw, sc, 3),
        "wavelet_kan": lambda x: swisk.ops.wavelet_kan(x, s, t, bw, "morlet"),
        "bspline_basis": lambda x: swisk.ops.bspline_basis(x, grid, 3),
    }


@pytest.mark.parametrize("name", ["kan_linear", "wavelet_kan", "bspline_basis"])
def test_func_transforms_match_autograd(rng, name):
    f = _cases(rng)[name]
    x = torch.randn(5, 4, generator=rng, dtype=D)
    loss = lambda x: f(x).square().sum()  # noqa: E731
    xr = x.clone().requires_grad_()
    want = torch.autograd.grad(loss(xr), xr)[0]
    assert want.abs().sum() > 0
    torch.testing.assert_close(torch.func.grad(loss)(x), want, rtol=1e-12, atol=1e-12)
    jac = torch.func.jacrev(f)(x)
    assert jac.shape == (*f(x).shape, 5, 4)
    torch.testing.assert_close(torch.einsum("...ij->ij", jac * (2 * f(x))[..., None, None]), want, rtol=1e-10,
                               atol=1e-10)
    per_sample = torch.func.vmap(torch.func.grad(lambda xx: loss(xx[None])))(x)
    torch.testing.assert_close(per_sample, want, rtol=1e-12, atol=1e-12)  # rows are independent
    torch.testing.assert_close(torch.func.vmap(f)(x[:, None])[:, 0], f(x), rtol=0, atol=0)


def test_per_sample_weight_gradients(rng):
    """vmap over grad in a weight, one sample at a time: each equals its own autograd gradient."""
    grid = torch.linspace(-2.2, 2.2, 12, dtype=D).expand(4, -1).contiguous()
    x, bw = torch.randn(3, 4, generator=rng, dtype=D), torch.randn(2, 4, generator=rng, dtype=D)
    sw, sc = torch.randn(2, 4, 8, generator=rng, dtype=D), torch.randn(2, 4, generator=rng, dtype=D)
    g = torch.func.vmap(torch.func.grad(lambda b, xx: swisk.ops.kan_linear(xx[None], grid, b, sw, sc, 3).sum()),
                        in_dims=(None, 0))(bw, x)
    for n in range(3):
        b = bw.clone().requires_grad_()
        want = torch.autograd.grad(swisk.ops.kan_linear(x[n:n + 1], grid, b, sw, sc, 3).sum(), b)[0]
        torch.testing.assert_close(g[n], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["kan_linear", "wavelet_kan", "bspline_basis"])
def test_forward_mode_raises_instead_of_a_silent_zero(rng, name):
    f = _cases(rng)[name]
    x = torch.randn(5, 4, generator=rng, dtype=D)
    with pytest.raises(NotImplementedError, match="jvp"):
        torch.func.jvp(f, (x,), (torch.ones_like(x),))
    with pytest.raises((NotImplementedError, RuntimeError), match="jvp"), fwAD.dual_level():
        f(fwAD.make_dual(x, torch.ones_like(x)))


def test_double_backward_raises_instead_of_a_silent_zero(rng):
    f = _cases(rng)["kan_linear"]
    x = torch.randn(5, 4, generator=rng, dtype=D, requires_grad=True)
    (gx,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    with pytest.raises(NotImplementedError, match="derivative"):
        gx.square().sum().backward()
