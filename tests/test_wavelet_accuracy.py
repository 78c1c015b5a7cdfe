"""shannon and morlet on the CPU backend at large t = (x - translation) / scale, fp32 inputs, against
fp64. Scales are powers of two and translations 0 where t is large, so the fp32 t is exactly the fp64
one and only the sin/cos of t can differ. swisk.reference's shannon, sinc(t / pi), errs by |t| 2^-53 in
the phase in fp64, so it judges only |t| <= 1e7; beyond, the oracle is torch.sin(t) / t in fp64 (libm-
grade reduction at every argument)."""
import math

import pytest
import torch

import swisk
from swisk import reference, testing

PI = math.pi


def large_x(gen, n, lo, hi):
    """n fp32 values, log-uniform in [lo, hi), half of them the nearest floats to multiples of pi."""
    mag = torch.exp(torch.empty(n, dtype=torch.float64).uniform_(math.log(lo), math.log(hi), generator=gen))
    near = (torch.round(mag / PI) * PI)
    mag = torch.where(torch.arange(n) % 2 == 0, mag, near)
    sign = torch.randint(0, 2, (n,), generator=gen) * 2 - 1
    return (mag * sign).float()


def pow2_scales(gen, shape, lo=-8, hi=8):
    e = torch.randint(lo, hi + 1, shape, generator=gen).double()
    return (torch.exp2(e) * (torch.randint(0, 2, shape, generator=gen) * 2 - 1)).float()


def shannon_terms(x, s, t, w):
    """w psi(t) for every (n, o, i) in fp64, psi = sin(t) / t (no t = 0 here)."""
    tt = (x.unsqueeze(-2) - t) / s
    return w * torch.sin(tt) / tt


def run(x, s, t, w, wavelet, oracle=False):
    with testing.backend("cpu"):
        got = swisk.ops.wavelet_kan(x, s, t, w, wavelet)
    args = [a.double() for a in (x, s, t, w)]
    want = shannon_terms(*args).sum(-1) if oracle else reference.wavelet_kan(*args, wavelet)
    return got, want


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lo,hi", [(1e5, 1e7), (1e7, 1e10), (1e10, 1e20), (1e20, 1e30), (1e30, 3e38)])
def test_shannon_each_value(lo, hi, dtype):
    """in = 1: every output is w psi(t) alone, so each is checked relative to itself."""
    gen = torch.Generator().manual_seed(int(math.log10(lo)))
    x = large_x(gen, 512, lo, hi).reshape(-1, 1)
    n_out = 24
    s = pow2_scales(gen, (n_out, 1), 0 if hi > 1e38 else -6, 6)  # |t| stays below 3.4e38
    t = torch.zeros(n_out, 1)
    w = torch.randn(n_out, 1, generator=gen)
    got, want = run(*(a.to(dtype) for a in (x, s, t, w)), "shannon", oracle=True)
    assert torch.isfinite(got).all()
    # relative, with a floor of a few subnormal steps (w sin(t) / t is subnormal near |t| = 3e38)
    tol, floor = (1e-6, 2.0**-149 * 1e7) if dtype == torch.float32 else (1e-14, 0.0)
    err = ((got.double() - want).abs() / (want.abs() + floor)).max().item()
    assert err <= tol, f"{dtype}, |t| in [{lo:g}, {hi:g}): relative error {err:.3g}"


def test_shannon_against_reference():
    """swisk.reference itself where its fp64 sinc is accurate (|t| <= 1e7: phase error <= 1e-9)."""
    gen = torch.Generator().manual_seed(1)
    x = large_x(gen, 256, 1e4, 1e7).reshape(-1, 1)
    s = torch.tensor([[1.0], [-1.0], [2.0], [-0.5]])
    got, want = run(x, s, torch.zeros(4, 1), torch.ones(4, 1), "shannon")
    err = ((got.double() - want).abs() / want.abs()).max().item()
    assert err <= 1e-6 + 1e7 * 2.0**-53 / 1e-4, f"relative error {err:.3g}"


def test_shannon_rows_mixing_far_and_near():
    """Rows with large and ordinary t side by side (a row with any far t takes the exact path whole);
    a far feature's weights ~ its |t|, so its terms weigh as much as the near ones."""
    gen = torch.Generator().manual_seed(3)
    n, n_in, n_out = 40, 37, 20
    mag = torch.pow(10.0, torch.empty(n_in, dtype=torch.float64).uniform_(4, 25, generator=gen))
    far = torch.rand(n_in, generator=gen) < 0.5
    x = (torch.rand(n, n_in, generator=gen, dtype=torch.float64) * 2 - 1) * mag
    x = torch.where(far, x, torch.randn(n, n_in, generator=gen, dtype=torch.float64) * 5).float()
    x[::4] = torch.randn(10, n_in, generator=gen) * 5  # some rows all near (the vector path)
    s = pow2_scales(gen, (n_out, n_in), -2, 2)
    t = torch.zeros(n_out, n_in)
    w = (torch.randn(n_out, n_in, generator=gen, dtype=torch.float64) * torch.where(far, mag, 1.0)).float()
    got, want = run(x, s, t, w, "shannon", oracle=True)
    terms = shannon_terms(*(a.double() for a in (x, s, t, w))).abs().sum(-1)
    err = ((got.double() - want).abs() / terms).max().item()
    assert err <= 1e-6, f"relative to the sum of |terms|: {err:.3g}"


@pytest.mark.parametrize("lo,hi", [(1e5, 1e7), (1e7, 1e10), (1e10, 1e15)])
def test_shannon_backward(lo, hi):
    """dx, dscale, dtranslation, dweight at large t (|t| <= 1e15, where t^2 is finite in fp32)."""
    gen = torch.Generator().manual_seed(11)
    n, n_in, n_out = 16, 24, 8
    x = large_x(gen, n * n_in, lo, hi).reshape(n, n_in)
    s = pow2_scales(gen, (n_out, n_in), 0, 0)
    args32 = [x, s, torch.zeros(n_out, n_in), torch.randn(n_out, n_in, generator=gen)]
    g = torch.randn(n, n_out, generator=gen)
    a32 = [a.clone().requires_grad_() for a in args32]
    with testing.backend("cpu"):
        swisk.ops.wavelet_kan(*a32, "shannon").backward(g)
    a64 = [a.double().requires_grad_() for a in args32]
    shannon_terms(*a64).sum(-1).backward(g.double())
    for name, mine, ref in zip(("x", "scale", "translation", "weight"), a32, a64):
        err = ((mine.grad.double() - ref.grad).abs().max() / ref.grad.abs().max()).item()
        assert err <= 1e-5, f"d{name}, |t| in [{lo:g}, {hi:g}): {err:.3g}"


def test_morlet_large_t():
    """cos(5t) e^(-t^2/2) is 0 in fp64 for every |t| > 40; fp32 must give 0 too (no NaN, no junk),
    and match near the envelope's end, where 5t passes 60."""
    gen = torch.Generator().manual_seed(5)
    x = torch.cat([large_x(gen, 256, 1e2, 1e30), torch.linspace(-13.0, 13.0, 256)]).reshape(-1, 1)
    s = torch.tensor([[1.0], [-1.0], [0.5], [4.0]])
    t = torch.zeros(4, 1)
    w = torch.ones(4, 1)
    got, want = run(x, s, t, w, "morlet")
    assert torch.isfinite(got).all()
    assert (got[:256] == 0).all()
    assert (got.double() - want).abs().max().item() <= 1e-6


def test_non_finite_t_gives_nan():
    x = torch.tensor([[float("inf")], [float("-inf")], [float("nan")], [1e30]])
    with testing.backend("cpu"):
        y = swisk.ops.wavelet_kan(x, torch.ones(2, 1), torch.zeros(2, 1), torch.ones(2, 1), "shannon")
    assert torch.isnan(y[:3]).all() and torch.isfinite(y[3]).all()
