"""swisk.ops.wavelet_kan against swisk.reference on every backend."""
import math

import pytest
import torch

import swisk
from swisk import reference, testing
from conftest import TOL

WAVELETS = list(reference.WAVELETS)
# Where each wavelet is interesting: Gaussian envelopes to |t| ~ 5, meyer's kinks at 0, 1/2, 1,
# shannon's slow sinc decay and its removable singularity at 0.
SPAN = {"mexican_hat": 5.0, "morlet": 4.0, "dog": 5.0, "meyer": 1.5, "shannon": 15.0}
# Relative bounds (max error / max |reference|) of the op and of its gradients.
REL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
GRAD_REL = {torch.float64: 1e-11, torch.float32: 5e-5, torch.float16: 2e-2, torch.bfloat16: 1e-1}


def inputs(rng, wavelet, lead, n_in, n_out, dtype=torch.float64):
    """Fresh inputs whose t = (x - translation) / scale spans the wavelet's range; scales of both signs."""
    scale = (torch.rand(n_out, n_in, generator=rng, dtype=torch.float64) * 1.5 + 0.5)
    scale = scale * (torch.randint(0, 2, (n_out, n_in), generator=rng) * 2 - 1)
    translation = torch.randn(n_out, n_in, generator=rng, dtype=torch.float64) * 0.3
    weight = torch.randn(n_out, n_in, generator=rng, dtype=torch.float64) / math.sqrt(n_in)
    x = (torch.rand(*lead, n_in, generator=rng, dtype=torch.float64) * 2 - 1) * SPAN[wavelet] * 0.6
    x.view(-1, n_in)[0, : min(n_in, n_out)] = translation.diagonal()  # exactly t = 0
    return [t.to(dtype) for t in (x, scale, translation, weight)]


def rel_err(got, want):
    return ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def test_reference_known_answers():
    t = torch.tensor([0.0, 1.0, 0.25, 0.75, 1.2, -0.3, math.pi], dtype=torch.float64)
    psi = {w: reference.wavelet(t, w) for w in WAVELETS}
    assert psi["mexican_hat"][0].item() == pytest.approx(-0.867325070584, abs=1e-12)  # Wav-KAN's sign
    assert psi["mexican_hat"][1].item() == 0.0
    assert psi["morlet"][0].item() == 1.0
    assert psi["morlet"][1].item() == pytest.approx(math.cos(5) * math.exp(-0.5), abs=1e-15)
    assert psi["dog"][1].item() == pytest.approx(-math.exp(-0.5), abs=1e-15)
    assert psi["meyer"][0].item() == 0.0
    assert psi["meyer"][2].item() == pytest.approx(math.sqrt(0.5), abs=1e-15)  # aux = 1 below 1/2
    assert psi["meyer"][3].item() == pytest.approx(0.5, abs=1e-15)  # nu(1/2) = 1/2: sin(3pi/4) cos(pi/4)
    assert psi["meyer"][4].item() == 0.0
    assert psi["shannon"][0].item() == 1.0
    assert psi["shannon"][5].item() == pytest.approx(math.sin(0.3) / 0.3, abs=1e-15)
    assert abs(psi["shannon"][6].item()) < 1e-15


@pytest.mark.parametrize("wavelet", WAVELETS)
def test_known_answers_through_the_op(backend, wavelet):
    """One input, one output, unit scale and weight: the op returns psi itself."""
    dev = testing.device_of(backend)
    t = torch.tensor([0.0, 1.0, 0.25, 0.75, 1.2, -0.3, -2.0])
    want = reference.wavelet(t.double(), wavelet)
    ones = torch.ones(1, 1)
    got = swisk.ops.wavelet_kan(t[:, None].to(dev), ones.to(dev), torch.zeros(1, 1).to(dev), ones.to(dev), wavelet)
    torch.testing.assert_close(got[:, 0].cpu().double(), want, atol=3e-7, rtol=0)


@pytest.mark.parametrize("wavelet", WAVELETS)
def test_matches_reference(backend, rng, wavelet):
    dev = testing.device_of(backend)
    for dtype in testing.dtypes_of(backend):
        x, s, t, w = inputs(rng, wavelet, (2, 5), 37, 19, dtype)
        want = reference.wavelet_kan(*(a.double() for a in (x, s, t, w)), wavelet)
        got = swisk.ops.wavelet_kan(*(a.to(dev) for a in (x, s, t, w)), wavelet).cpu()
        assert got.shape == (2, 5, 19) and got.dtype == dtype
        err = rel_err(got, want)
        assert err <= REL[dtype], f"{backend} {wavelet} {dtype}: {err:.3g} (seed {rng.initial_seed()})"


@pytest.mark.parametrize("wavelet", WAVELETS)
def test_backward_matches_reference(backend, rng, wavelet):
    dev = testing.device_of(backend)
    for dtype in testing.dtypes_of(backend):
        args = inputs(rng, wavelet, (11,), 21, 9, dtype)
        go = torch.randn(11, 9, generator=rng, dtype=torch.float64)
        ours = [a.to(dev).requires_grad_() for a in args]
        got = torch.autograd.grad(swisk.ops.wavelet_kan(*ours, wavelet), ours, go.to(dtype).to(dev))
        ref = [a.double().requires_grad_() for a in args]
        want = torch.autograd.grad(reference.wavelet_kan(*ref, wavelet), ref, go.to(dtype).double())
        for name, g, r in zip(("x", "scale", "translation", "weight"), got, want):
            assert g.dtype == dtype
            err = rel_err(g.cpu(), r)
            assert err <= GRAD_REL[dtype], f"{backend} {wavelet} {dtype} d{name}: {err:.3g} (seed {rng.initial_seed()})"


@pytest.mark.parametrize("wavelet", WAVELETS)
def test_gradcheck_fp64(rng, wavelet):
    args = [a.requires_grad_() for a in inputs(rng, wavelet, (4,), 5, 3)]
    args[0].data[0] += 1e-3  # gradcheck's finite differences must not straddle meyer's kink at t = 0
    assert torch.autograd.gradcheck(lambda *a: swisk.ops.wavelet_kan(*a, wavelet), args)


def test_derivatives_at_zero(backend):
    """At t = 0: dog' = -1, mexican_hat' = morlet' = 0, and the kinks: meyer'(0) = 0 (torch's |t|'),
    shannon'(0) = 0 (its series)."""
    want = {"mexican_hat": 0.0, "morlet": 0.0, "dog": -1.0, "meyer": 0.0, "shannon": 0.0}
    for wavelet, d in want.items():
        x = torch.full((1, 1), 0.7, requires_grad=True)
        (gx,) = torch.autograd.grad(
            swisk.ops.wavelet_kan(x, torch.full((1, 1), 2.0), torch.full((1, 1), 0.7), torch.ones(1, 1), wavelet), x)
        assert gx.item() == pytest.approx(d / 2.0, abs=1e-7), wavelet


def test_far_tail_gradients(backend):
    """Far out in the Gaussian tails t^2 (and t (3 - t^2)) overflow where the envelope is 0: the value and
    the gradients are 0, as the formulation's, not inf · 0 = NaN."""
    cases = [(torch.float32, "dog", 1e20), (torch.float32, "mexican_hat", 1e19), (torch.float32, "morlet", 1e19)]
    if backend == "cpu":
        cases += [(torch.float64, "dog", 1e160), (torch.float64, "mexican_hat", 1e150)]
    for dtype, wavelet, u in cases:
        x = torch.tensor([[u, -u]], dtype=dtype, requires_grad=True)
        s, t, w = (torch.full((1, 2), v, dtype=dtype, requires_grad=True) for v in (1.0, 0.0, 1.0))
        y = swisk.ops.wavelet_kan(x, s, t, w, wavelet)
        grads = torch.autograd.grad(y.sum(), (x, s, t, w))
        ref = reference.wavelet_kan(x, s, t, w, wavelet)
        want = torch.autograd.grad(ref.sum(), (x, s, t, w))
        assert y.item() == ref.item() == 0, (wavelet, u)
        for g, r in zip(grads, want):
            assert torch.equal(g.abs(), r.abs()), (wavelet, u, g, r)  # zeros (of either sign)


def test_shannon_derivative_near_zero():
    """Just off 0 the direct (t cos t - sin t) / t^2 cancels; the series keeps shannon' exact."""
    one = torch.ones(1, 1, dtype=torch.float64)
    for t in (1e-6, 1e-4, 0.1, 0.49, 0.51, 2.0):
        x = torch.full((1, 1), t, dtype=torch.float64, requires_grad=True)
        (gx,) = torch.autograd.grad(swisk.ops.wavelet_kan(x, one, 0 * one, one, "shannon"), x)
        want = -t / 3 + t**3 / 30 - t**5 / 840 + t**7 / 45360 if t < 0.1 else (t * math.cos(t) - math.sin(t)) / t**2
        assert gx.item() == pytest.approx(want, rel=1e-13, abs=1e-18), t
        (gr,) = torch.autograd.grad(reference.wavelet(x, "shannon").sum(), x)  # the oracle too (its series)
        assert gr.item() == pytest.approx(want, rel=1e-13, abs=1e-18), t


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shannon_far_second_derivatives(rng, dtype):
    """Far out (|t| >= 1e5 in fp32) the unused series overflowed and turned the double backward (the
    formulation's) NaN; shannon'' there is finite and small, ~ -sin(t)/t, through the op and through the oracle."""
    far = [1e5, -1e7, 1e18, 1e30] if dtype == torch.float32 else [1e5, -1e30, 1e100, 1e300]
    u = (torch.rand(1, 4, generator=rng, dtype=torch.float64) * 9 + 1) * torch.tensor(far, dtype=torch.float64)
    x = u.to(dtype).requires_grad_()
    s, t, w = (torch.full((1, 4), v, dtype=dtype, requires_grad=True) for v in (1.0, 0.0, 1.0))
    for f in (swisk.ops.wavelet_kan, reference.wavelet_kan):
        (gx,) = torch.autograd.grad(f(x, s, t, w, "shannon").sum(), x, create_graph=True)
        second = torch.autograd.grad(gx.sum(), (x, s, w))
        assert all(torch.isfinite(g).all() for g in (gx, *second)), (f, gx, second)
        assert (second[0].double().abs() <= 2 / u.abs()).all(), (f, second[0])  # |psi''| <= (1 + 4/|t|) / |t|


def test_meyer_nan_gradient():
    """A NaN input gives NaN gradients from the op and from the oracle (whose clamp made them 0)."""
    x = torch.tensor([[float("nan"), 0.7]], dtype=torch.float64, requires_grad=True)
    s, t, w = (torch.full((1, 2), v, dtype=torch.float64, requires_grad=True) for v in (1.0, 0.0, 1.0))
    for f in (swisk.ops.wavelet_kan, reference.wavelet_kan):
        (gx,) = torch.autograd.grad(f(x, s, t, w, "meyer").sum(), x)
        assert gx[0, 0].isnan() and gx[0, 1].isfinite(), (f, gx)


def test_meyer_at_infinity(backend):
    """meyer(±inf) is 0 (its envelope is 0 from |t| = 1 on), as the formulation's: the kernels took
    sin(pi·inf) = NaN times that 0. Value and gradients (NaN where the formulation's are: the scale's and
    translation's 0·inf) as the formulation's."""
    for dtype in [torch.float32] + ([torch.float64] if backend == "cpu" else []):
        x = torch.tensor([[float("inf"), -float("inf"), 0.7]], dtype=dtype, requires_grad=True)
        s, t, w = (torch.full((1, 3), v, dtype=dtype, requires_grad=True) for v in (1.3, 0.2, 0.9))
        y = swisk.ops.wavelet_kan(x, s, t, w, "meyer")
        ref = reference.wavelet_kan(x, s, t, w, "meyer")
        assert y.isfinite().all() and rel_err(y, ref) <= REL[dtype]
        grads = torch.autograd.grad(y.sum(), (x, s, t, w))
        want = torch.autograd.grad(ref.sum(), (x, s, t, w))
        for g, r in zip(grads, want):
            assert torch.equal(g.isnan(), r.isnan()), (dtype, g, r)
            assert rel_err(g.nan_to_num(), r.nan_to_num()) <= REL[dtype], (dtype, g, r)


def test_deterministic_backward(rng):
    """Bitwise repeatable, with the CPU's dx partial sums over chunks of out (few feature blocks)."""
    args = [a.float().requires_grad_() for a in inputs(rng, "morlet", (64,), 40, 96)]
    go = torch.randn(64, 96, generator=rng)
    a = torch.autograd.grad(swisk.ops.wavelet_kan(*args, "morlet"), args, go)
    b = torch.autograd.grad(swisk.ops.wavelet_kan(*args, "morlet"), args, go)
    assert all(torch.equal(u, v) for u, v in zip(a, b))


def test_shapes_and_non_contiguous(backend, rng):
    x, s, t, w = inputs(rng, "dog", (3,), 6, 4, torch.float32)
    xt = torch.randn(6, 5, 3, generator=rng).transpose(0, 2)  # (3, 5, 6), non-contiguous
    wt = w.t().contiguous().t()
    assert not xt.is_contiguous() and not wt.is_contiguous()
    got = swisk.ops.wavelet_kan(xt, s, t, wt, "dog")
    torch.testing.assert_close(got, reference.wavelet_kan(xt, s, t, w, "dog"), atol=2e-6, rtol=0)
    single = swisk.ops.wavelet_kan(x[0], s, t, w, "dog")  # (in,) -> (out,)
    assert single.shape == (4,)
    torch.testing.assert_close(single, reference.wavelet_kan(x[0], s, t, w, "dog"), atol=2e-6, rtol=0)
    empty = swisk.ops.wavelet_kan(x[:0], s, t, w, "dog")
    assert empty.shape == (0, 4)
    zero_in = swisk.ops.wavelet_kan(torch.randn(3, 0), s[:, :0], t[:, :0], w[:, :0], "dog")
    assert torch.equal(zero_in, torch.zeros(3, 4))


@pytest.mark.parametrize("shape", [((0, 3), 2), ((4, 3), 0), ((4, 0), 2), ((2, 0, 3), 2)])
def test_empty_second_derivatives(backend, rng, shape):
    """Double backward of empty sizes (no rows, out = 0, in = 0): zero gradients of the right shapes
    (the formulation's row sum inferred a -1 from 0 elements and raised)."""
    xs, n_out = shape
    x = torch.randn(*xs, generator=rng, requires_grad=True)
    s, t, w = (torch.randn(n_out, xs[-1], generator=rng).add_(3).requires_grad_() for _ in range(3))
    (gx,) = torch.autograd.grad(swisk.ops.wavelet_kan(x, s, t, w, "morlet").sum(), x, create_graph=True)
    second = torch.autograd.grad(gx.sum(), (x, s, t, w), allow_unused=True, materialize_grads=True)
    for g, a in zip(second, (x, s, t, w)):
        assert g.shape == a.shape and not g.any()


def test_tiles_with_tails(backend, rng):
    """Several GPU tiles with ragged edges (64-wide tiles, 16-wide reduction chunks)."""
    if backend != "cpu":
        x, s, t, w = inputs(rng, "mexican_hat", (70,), 19, 66, torch.float32)
    else:
        x, s, t, w = inputs(rng, "mexican_hat", (130,), 33, 131, torch.float32)
    args = [a.requires_grad_() for a in (x, s, t, w)]
    go = torch.randn(x.shape[0], w.shape[0], generator=rng)
    got = torch.autograd.grad(swisk.ops.wavelet_kan(*args, "mexican_hat"), args, go)
    ref = [a.detach().double().requires_grad_() for a in args]
    want = torch.autograd.grad(reference.wavelet_kan(*ref, "mexican_hat"), ref, go.double())
    for g, r in zip(got, want):
        assert rel_err(g, r) <= GRAD_REL[torch.float32]


def test_opcheck(rng):
    x, s, t, w = inputs(rng, "morlet", (5,), 6, 4, torch.float32)
    args = [a.requires_grad_() for a in (x, s, t, w)]
    torch.library.opcheck(torch.ops.swisk.wavelet_kan.default, (*args, "morlet"))
    go = torch.randn(5, 4, generator=rng)
    torch.library.opcheck(torch.ops.swisk.wavelet_kan_backward.default,
                          (*(a.detach() for a in args), go, "morlet"))


def test_compile_fullgraph(rng):
    x, s, t, w = inputs(rng, "meyer", (8,), 6, 4, torch.float32)

    @torch.compile(fullgraph=True)
    def f(x, s):
        return swisk.ops.wavelet_kan(torch.tanh(x), s, t, w, "meyer").sum(-1) * 2

    s = s.requires_grad_()
    y = f(x, s)
    torch.testing.assert_close(y, reference.wavelet_kan(torch.tanh(x), s, t, w, "meyer").sum(-1) * 2)
    y.sum().backward()
    assert s.grad is not None and torch.isfinite(s.grad).all()


def test_autocast(rng):
    """Under autocast a bf16 x meets fp32 parameters: the op runs in fp32."""
    x, s, t, w = inputs(rng, "dog", (6,), 5, 3, torch.float32)
    lin = torch.nn.Linear(5, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = lin(x)
        assert h.dtype == torch.bfloat16
        y = swisk.ops.wavelet_kan(h, s, t, w, "dog")
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, reference.wavelet_kan(h.float(), s, t, w, "dog"), atol=2e-6, rtol=0)


def bad(exc, match, *args):
    with pytest.raises(exc, match=match):
        swisk.ops.wavelet_kan(*args)


def test_bad_inputs(backend):
    if backend not in ("cpu", "cuda-emu", "metal-emu"):
        pytest.skip("host checks")
    x, s, t, w = torch.randn(3, 4), torch.ones(2, 4), torch.zeros(2, 4), torch.randn(2, 4)
    valid = r"valid: mexican_hat, morlet, dog, meyer, shannon"
    bad(ValueError, r"\[wavelet_kan\] wavelet: unknown wavelet 'haar'; " + valid, x, s, t, w, "haar")
    bad(TypeError, r"\[wavelet_kan\] wavelet: expected a str", x, s, t, w, 3)
    with pytest.raises(ValueError, match=valid):  # the core says the same
        swisk._C.wavelet_kan_prepare(*(swisk._backend.view("t", "a", a) for a in (x, s, t, w)), "bump", backend)
    bad(ValueError, r"\[wavelet_kan\] weight: must be \(out, in\) with in = x.shape\[-1\] = 4", x, s, t, w[:, :3], "dog")
    bad(ValueError, r"\[wavelet_kan\] weight: must be \(out, in\)", x, s, t, w[0], "dog")
    bad(ValueError, r"\[wavelet_kan\] scale: must have shape \(2, 4\), got \(3, 4\)", x, torch.ones(3, 4), t, w, "dog")
    bad(ValueError, r"\[wavelet_kan\] translation: must have shape \(2, 4\)", x, s, t[:, :2], w, "dog")
    bad(ValueError, r"\[wavelet_kan\] x: must be \(\.\.\., in\)", torch.tensor(1.0), s, t, w, "dog")
    bad(TypeError, r"\[wavelet_kan\] x: expected a floating-point tensor, got int64", x.long(), s, t, w, "dog")
    bad(TypeError, r"\[wavelet_kan\] scale: dtype float64 differs from x's float32", x, s.double(), t, w, "dog")
    bad(TypeError, r"\[wavelet_kan\] weight: expected a torch.Tensor", x, s, t, [[1.0] * 4] * 2, "dog")
    # zero scale: host memory is checked (GPUs give inf / NaN instead, see the C++ tests)
    z = s.clone()
    z[1, 2] = 0
    bad(ValueError, r"\[wavelet_kan\] scale: must be non-zero; scale\[1, 2\] is 0", x, z, t, w, "dog")
    # negative scales are fine
    torch.testing.assert_close(swisk.ops.wavelet_kan(x, -s, t, w, "dog"), reference.wavelet_kan(x, -s, t, w, "dog"))
    if backend != "cpu":
        bad(TypeError, r"float64 is not supported", x.double(), s.double(), t.double(), w.double(), "dog")


@pytest.mark.skipif(not swisk.backends()["cuda"], reason="needs a CUDA device")
def test_cuda_zero_scale_and_devices():
    x, s, t, w = (torch.randn(3, 4, device="cuda"), torch.ones(2, 4, device="cuda"), torch.zeros(2, 4, device="cuda"),
                  torch.randn(2, 4, device="cuda"))
    z = s.clone()
    z[0, 0] = 0
    y = swisk.ops.wavelet_kan(x, z, t, w, "dog")
    torch.cuda.synchronize()
    assert not torch.isfinite(y[:, 0]).all() and torch.isfinite(y[:, 1]).all()
    bad(ValueError, r"\[wavelet_kan\] scale: is on cpu:0 but x is on cuda:0", x, s.cpu(), t, w, "dog")


def test_one_list_of_wavelets():
    """The core's names (generated from the kernel header's list) are the reference's, in id order,
    and every one has its Metal kernels in the shipped source."""
    from importlib import resources

    assert swisk._C.wavelet_names().split(", ") == list(reference.WAVELETS)
    src = resources.files("swisk").joinpath("swisk_kernels.metal").read_text()
    assert "SWISK_WAVELETS(SWISK_WAV_F32)" in src and "#define SWISK_WAVELETS(X)" in src
