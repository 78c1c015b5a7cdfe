"""torch.func, forward mode and second derivatives through every op: grad, jacrev, vmap and
per-sample gradients equal autograd's; jvp, forward_ad, hessian, gradgradcheck and PINN-style second
derivatives equal the reference formulation's (fp64)."""
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


def _with_params(rng):
    """Each op as a function of all its differentiable inputs, with its reference twin."""
    r = lambda *s: torch.randn(*s, generator=rng, dtype=D)  # noqa: E731
    grid = torch.linspace(-2.2, 2.2, 12, dtype=D).expand(4, -1).contiguous()
    x, bw, sw, sc = r(5, 4) * 0.8, r(3, 4), r(3, 4, 8), r(3, 4)
    s, t = torch.rand(3, 4, generator=rng, dtype=D) + 0.5, r(3, 4)
    ref = swisk.reference
    return {
        "kan_linear": (lambda *a: swisk.ops.kan_linear(a[0], grid, *a[1:], 3),
                       lambda *a: ref.kan_linear(a[0], grid, *a[1:], 3), (x, bw, sw, sc)),
        "wavelet_kan": (lambda *a: swisk.ops.wavelet_kan(*a, "meyer"), lambda *a: ref.wavelet_kan(*a, "meyer"),
                        (x, s, t, bw)),
        "bspline_basis": (lambda x: swisk.ops.bspline_basis(x, grid, 3), lambda x: ref.bspline_basis(x, grid, 3),
                          (x,)),
    }


NAMES = ["kan_linear", "wavelet_kan", "bspline_basis"]


@pytest.mark.parametrize("name", NAMES)
def test_forward_mode_tangents(rng, name):
    """torch.func.jvp and torch.autograd.forward_ad: the formulation's tangents (never a silent zero)."""
    f, fr, args = _with_params(rng)[name]
    tangents = tuple(torch.randn_like(a) for a in args)
    want = torch.func.jvp(fr, args, tangents)[1]
    assert want.abs().max() > 0
    torch.testing.assert_close(torch.func.jvp(f, args, tangents)[1], want, rtol=1e-12, atol=1e-12)
    with fwAD.dual_level():
        got = fwAD.unpack_dual(f(*(fwAD.make_dual(a, t) for a, t in zip(args, tangents)))).tangent
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    jac = torch.func.jacfwd(f)(*args)
    torch.testing.assert_close(jac, torch.func.jacrev(fr)(*args), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_second_derivatives(rng, name):
    """gradgradcheck in every input; the hessian and a PINN-style d/dx of dy/dx equal the formulation's."""
    f, fr, args = _with_params(rng)[name]
    assert torch.autograd.gradgradcheck(f, [a.clone().requires_grad_() for a in args])
    loss, loss_ref = (lambda x: f(x, *args[1:]).square().sum()), (lambda x: fr(x, *args[1:]).square().sum())
    h, h_ref = torch.func.hessian(loss)(args[0]), torch.func.hessian(loss_ref)(args[0])
    torch.testing.assert_close(h, h_ref, rtol=1e-10, atol=1e-10)
    second = []
    for fn in (f, fr):
        x = args[0].clone().requires_grad_()
        (gx,) = torch.autograd.grad(fn(x, *args[1:]).sum(), x, create_graph=True)
        second.append(torch.autograd.grad(gx.sum(), x)[0])
    assert second[1].abs().max() > 0
    torch.testing.assert_close(second[0], second[1], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["kan_linear", "wavelet_kan", "bspline_basis", "kan_conv2d"])
def test_forward_over_forward(rng, name):
    """Forward mode within forward mode (jvp of jvp, jacfwd of jacfwd; a custom Function's jvp is not
    differentiable there): the formulation's second derivatives, never a silent zero; and jacrev of
    jacrev alike."""
    shape, f, fr = _second_cases(rng, D)[name]
    x = torch.rand(2, *shape, generator=rng, dtype=D) * 3 - 1.5
    t1, t2 = torch.randn_like(x), torch.randn_like(x)
    loss, loss_ref = (lambda v: f(v).square().sum()), (lambda v: fr(v).square().sum())
    nested = [torch.func.jvp(lambda v: torch.func.jvp(g, (v,), (t1,))[1], (x,), (t2,))[1] for g in (loss, loss_ref)]
    assert nested[1].abs() > 0
    torch.testing.assert_close(nested[0], nested[1], rtol=1e-10, atol=1e-10)
    fv = lambda v: f(v[None])[0].square().sum()  # noqa: E731  (one sample: the Hessian stays small)
    fv_ref = lambda v: fr(v[None])[0].square().sum()  # noqa: E731
    want = torch.func.jacrev(torch.func.jacrev(fv_ref))(x[0])
    torch.testing.assert_close(torch.func.jacfwd(torch.func.jacfwd(fv))(x[0]), want, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(torch.func.jacrev(torch.func.jacrev(fv))(x[0]), want, rtol=1e-10, atol=1e-10)


def _second_cases(rng, dtype, device="cpu"):
    """Each op as f(x) on fixed parameters, and its plain-torch formulation; parameters drawn in fp64."""
    from swisk import reference
    r = lambda *s: torch.randn(*s, generator=rng, dtype=D)  # noqa: E731
    grid = torch.linspace(-2.2, 2.2, 12, dtype=D).expand(4, -1).contiguous()
    bw, sw, sc = r(3, 4), r(3, 4, 8), r(3, 4)
    s, t = torch.rand(3, 4, generator=rng, dtype=D) + 0.5, r(3, 4)
    cbw, csw, csc = r(3, 4, 3, 3) * 0.3, r(3, 32, 3, 3) * 0.3, r(3, 4, 3, 3)
    c = lambda *a: [v.to(device, dtype) for v in a]  # noqa: E731
    return {
        "kan_linear": ((4,), lambda x, g=c(grid, bw, sw, sc): swisk.ops.kan_linear(x, *g, 3),
                       lambda x: reference.kan_linear(x, grid, bw, sw, sc, 3)),
        "wavelet_kan": ((4,), lambda x, g=c(s, t, bw): swisk.ops.wavelet_kan(x, *g, "morlet"),
                        lambda x: reference.wavelet_kan(x, s, t, bw, "morlet")),
        "bspline_basis": ((4,), lambda x, g=c(grid): swisk.ops.bspline_basis(x, g[0], 3),
                          lambda x: reference.bspline_basis(x, grid, 3)),
        "kan_conv2d": ((4, 5, 5), lambda x, g=c(grid, cbw, csw, csc): swisk.ops.kan_conv2d(x, *g, 3, 1, 1),
                       lambda x: reference.kan_conv(x, grid, cbw, csw, csc, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1)),
    }


@pytest.mark.parametrize("name", ["kan_linear", "wavelet_kan", "bspline_basis", "kan_conv2d"])
def test_double_backward_on_every_backend(backend, rng, name):
    """d/dx of (dL/dx · w) through each op on every backend (the emulated GPU kernels in fp32) against
    the formulation in fp64: the backward's own backward runs on each backend's kernels."""
    from swisk import testing
    dtype = testing.dtypes_of(backend)[0]
    dev = testing.device_of(backend)
    shape, f, fr = _second_cases(rng, dtype, dev)[name]
    x = torch.randn(3, *shape, generator=rng, dtype=D) * 0.8
    w = torch.randn(x.shape, generator=rng, dtype=D)
    results = []
    for fn, xx, ww in ((f, x.to(dev, dtype), w.to(dev, dtype)), (fr, x, w)):
        xx = xx.clone().requires_grad_()
        (g,) = torch.autograd.grad(fn(xx).square().sum(), xx, create_graph=True)
        (h,) = torch.autograd.grad((g * ww).sum(), xx)
        results.append(h.detach().cpu().double())
    got, want = results
    assert want.abs().max() > 0
    tol = 1e-9 if dtype == D else 2e-3
    assert ((got - want).abs().max() / want.abs().max()).item() <= tol
