"""sketched_linear (Panther's SKLinear math on two vendor GEMMs) and swisk.nn.SKLinear against Panther's
formulation (swisk.reference.sketched_linear) and Panther's initialisation, draw by draw."""
import math
import warnings

import numpy as np
import pytest
import torch

import swisk
from swisk import reference
from swisk.compat.panther import SKLinear

F64 = torch.float64


def rel_err(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30)).item()


def make(rng, t, fin, fout, r, dtype=F64, bias=True):
    g = lambda *s: torch.randn(*s, generator=rng, dtype=F64).to(dtype)  # noqa: E731
    return [g(t, fin, r), g(t, r, fout), g(t, r, fout), g(t, fin, r), g(fout) if bias else None]


@pytest.fixture(params=["factors", "dense"])
def form(request, monkeypatch):
    """sketched_linear pinned to each of its forms: through the (batch, T·r) intermediates, or through
    the layer's matrix W (chosen by multiply-adds, _dense_is_cheaper)."""
    from swisk._ops import sketched
    monkeypatch.setattr(sketched, "_dense_is_cheaper", lambda *a: request.param == "dense")
    return request.param


def test_the_form_follows_the_multiply_adds():
    """Panther's tutorial layer (2048->1024, T=8, r=128: T·r = 1024) trains through its factors at batch
    256 and through W at batch 4096 (1.9x fewer products); a compressing layer (4096->4096, T=2, r=64)
    never through W; inference counts the forward alone."""
    from swisk._ops.sketched import _dense_is_cheaper
    assert not _dense_is_cheaper(256, 2048, 1024, 1024, True)
    assert _dense_is_cheaper(4096, 2048, 1024, 1024, True)
    assert not _dense_is_cheaper(2**20, 4096, 4096, 128, True) and not _dense_is_cheaper(2**20, 4096, 4096, 128, False)
    assert _dense_is_cheaper(2048, 2048, 1024, 1024, False) and not _dense_is_cheaper(512, 2048, 1024, 1024, False)


@pytest.mark.parametrize("t,fin,fout,r,lead", [(1, 5, 3, 2, (4,)), (3, 17, 9, 5, (2, 3)), (8, 40, 24, 7, (33,))])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_and_gradients_fp64(rng, t, fin, fout, r, lead, bias, form):
    params = make(rng, t, fin, fout, r, bias=bias)
    x = torch.randn(*lead, fin, generator=rng, dtype=F64, requires_grad=True)
    leaves = [x] + [p if p is None else p.requires_grad_() for p in params]
    y = swisk.ops.sketched_linear(*leaves)
    want = reference.sketched_linear(*leaves)
    assert y.shape == (*lead, fout) and rel_err(y, want) <= 1e-13
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    moving = [p for p in leaves if p is not None]
    for a, b in zip(torch.autograd.grad(y, moving, go), torch.autograd.grad(want, moving, go)):
        assert rel_err(a, b) <= 1e-12


def test_known_answer():
    """T = 1, r = 1, in = out = 1: y = (x·s1·u1 + x·u2·s2)/2 + b."""
    one = lambda v: torch.tensor([[[v]]], dtype=F64)  # noqa: E731
    y = swisk.ops.sketched_linear(torch.tensor([[2.0]], dtype=F64), one(3.0), one(5.0), one(7.0), one(11.0),
                                  torch.tensor([0.5], dtype=F64))
    assert y.item() == (2 * 3 * 7 + 2 * 11 * 5) / 2 + 0.5


def test_gradcheck_gradgradcheck_jvp_vmap(rng, form):
    params = [p.requires_grad_() for p in make(rng, 2, 4, 3, 2)]
    x = torch.randn(3, 4, generator=rng, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(swisk.ops.sketched_linear, (x, *params))
    assert torch.autograd.gradgradcheck(swisk.ops.sketched_linear, (x, *params))
    t = torch.randn(x.shape, generator=rng, dtype=F64)
    _, jv = torch.func.jvp(lambda x: swisk.ops.sketched_linear(x, *params), (x,), (t,))
    _, want = torch.func.jvp(lambda x: reference.sketched_linear(x, *params), (x,), (t,))
    assert rel_err(jv, want) <= 1e-12
    xs = torch.randn(5, 3, 4, generator=rng, dtype=F64)
    got = torch.func.vmap(lambda x: swisk.ops.sketched_linear(x, *params))(xs)
    assert rel_err(got, reference.sketched_linear(xs, *params)) <= 1e-12


def test_fp32_and_bf16_error_bounds(rng, form):
    params = make(rng, 4, 96, 48, 12)
    x = torch.randn(64, 96, generator=rng, dtype=F64)
    want = {dt: reference.sketched_linear(*(p.to(dt).double() for p in (x, *params)))
            for dt in (torch.float32, torch.bfloat16)}  # the formulation on the rounded inputs
    y32 = swisk.ops.sketched_linear(x.float(), *[p.float() for p in params])
    assert y32.dtype == torch.float32 and rel_err(y32, want[torch.float32]) <= 1e-5
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yb = swisk.ops.sketched_linear(x.float(), *[p.float() for p in params])
    assert yb.dtype == torch.bfloat16 and rel_err(yb, want[torch.bfloat16]) <= 1e-2


def test_compile(rng):
    params = make(rng, 2, 8, 6, 3, dtype=torch.float32)
    x = torch.randn(5, 8, generator=rng)
    f = torch.compile(swisk.ops.sketched_linear, fullgraph=True)
    assert rel_err(f(x, *params), swisk.ops.sketched_linear(x, *params)) <= 1e-6


@pytest.mark.parametrize("fin, r", [(0, 3), (6, 0)])
def test_empty_features_and_rank(rng, form, fin, r):
    """in = 0 or r = 0: the bias (zero products), and gradients of the right shapes (the reshapes
    inferred a -1 from 0 elements and raised); the SRHT layer asks for r >= 1 by name."""
    params = make(rng, 2, fin, 4, r)
    x = torch.randn(5, fin, generator=rng, dtype=F64)
    args = [a.requires_grad_() for a in (x, *params)]
    y = swisk.ops.sketched_linear(*args)
    want = reference.sketched_linear(*args)
    assert y.shape == (5, 4) and torch.allclose(y, want) and torch.equal(y, params[-1].expand(5, 4))
    grads = torch.autograd.grad(y.sum(), args)
    assert [g.shape for g in grads] == [a.shape for a in args]
    if r == 0:
        with pytest.raises(ValueError, match=r"\[srht_sketched_linear\] S1s: low rank"):
            swisk.ops.srht_sketched_linear(x, params[0], params[1], 1, params[4])


def test_bad_inputs(rng):
    s1, s2, u1, u2, b = make(rng, 2, 6, 4, 3)
    x = torch.randn(2, 6, dtype=F64)
    op = swisk.ops.sketched_linear
    cases = [
        (lambda: op(x[:, :5], s1, s2, u1, u2, b), ValueError, r"\[sketched_linear\] x"),
        (lambda: op(x, s1, s2, u1[:, :2], u2, b), ValueError, r"\[sketched_linear\] U1s"),
        (lambda: op(x, s1, s2[:1], u1, u2, b), ValueError, r"\[sketched_linear\] S2s"),
        (lambda: op(x, s1, s2, u1, u2[0], b), ValueError, r"\[sketched_linear\] U2s"),
        (lambda: op(x, s1, s2, u1, u2, b[:3]), ValueError, r"\[sketched_linear\] bias"),
        (lambda: op(x.float(), s1, s2, u1, u2, b), TypeError, r"\[sketched_linear\] S1s"),
        (lambda: op(x, s1.int(), s2, u1, u2, b), TypeError, r"\[sketched_linear\] S1s"),
        (lambda: op(x, "S1s", s2, u1, u2, b), TypeError, r"\[sketched_linear\] S1s"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()


def _panther_init(seed, fin, fout, t, r, bias=True):
    """Panther's SKLinear initialisation, draw by draw: U1s (T draws of rand(r, out)), U2s (T draws of
    rand(r, in), transposed), W (in, out) kaiming-uniform (a = sqrt 5), S1s = W·U1ᵀ, S2s = U2ᵀ·W, bias
    uniform(±1/sqrt(out)) (fan-in of the (in, out) W)."""
    torch.manual_seed(seed)
    sign = lambda m, n: torch.sign(torch.rand(m, n) - 0.5) / math.sqrt(m)  # noqa: E731
    u1 = torch.stack([sign(r, fout) for _ in range(t)])
    u2 = torch.stack([sign(r, fin).T for _ in range(t)])
    w = torch.empty(fin, fout)
    torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    out = {"U1s": u1, "U2s": u2, "S1s": torch.stack([w @ u1[i].T for i in range(t)]),
           "S2s": torch.stack([u2[i].T @ w for i in range(t)])}
    if bias:
        out["bias"] = torch.empty(fout).uniform_(-1 / math.sqrt(fout), 1 / math.sqrt(fout))
    return out


@pytest.mark.parametrize("bias", [True, False])
def test_layer_initialisation_and_names_as_panther(bias):
    want = _panther_init(7, 30, 20, 2, 3, bias)
    torch.manual_seed(7)
    layer = SKLinear(30, 20, 2, 3, bias=bias)
    sd = layer.state_dict()
    assert set(sd) == set(want)
    for k, v in want.items():
        torch.testing.assert_close(sd[k], v, rtol=0, atol=0)
    assert layer.U1s.abs().unique().tolist() == [pytest.approx(1 / math.sqrt(3))]


def test_layer_forward_state_dict_and_w_init(rng):
    torch.manual_seed(3)
    a = SKLinear(33, 17, 3, 4, dtype=F64)
    x = torch.randn(5, 2, 33, generator=rng, dtype=F64)
    want = reference.sketched_linear(x, a.S1s, a.S2s, a.U1s, a.U2s, a.bias)
    assert rel_err(a(x), want) <= 1e-13
    b = SKLinear(33, 17, 3, 4, dtype=F64)
    b.load_state_dict(a.state_dict())
    assert torch.equal(a(x), b(x))
    w = torch.randn(17, 33, generator=rng, dtype=F64)
    c = SKLinear(33, 17, 2, 4, W_init=w, dtype=F64)
    torch.testing.assert_close(c.S1s[1], w.T @ c.U1s[1].T)
    with pytest.warns(UserWarning, match="more parameters than a fully connected layer"):
        SKLinear(8, 8, 2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SKLinear(64, 64, 1, 4)


def test_layer_bad_arguments():
    with pytest.raises(ValueError, match=r"\[SKLinear\] low_rank"):
        SKLinear(8, 8, 1, 0)
    with pytest.raises(TypeError, match=r"\[SKLinear\] num_terms"):
        SKLinear(8, 8, 1.5, 2)
    with pytest.raises(ValueError, match=r"\[SKLinear\] W_init"):
        SKLinear(8, 6, 1, 2, W_init=torch.randn(8, 6))
    with pytest.raises(ValueError, match=r"\[SKLinear\] seed"):
        SKLinear(8, 8, 1, 2, seed=-1)
    with pytest.raises(TypeError, match=r"\[SKLinear\] W_init"):
        SKLinear(8, 6, 1, 2, W_init=torch.ones(6, 8, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"\[SKLinear\] dtype"):
        SKLinear(8, 6, 1, 2, dtype=torch.int32)
    with pytest.raises(TypeError, match=r"\[SKConv2d\] dtype"):
        swisk.nn.SKConv2d(3, 4, 3, dtype=torch.int32)


def test_seeded_layer_regenerates_its_operators(rng):
    """seed=: no U1s/U2s stored (the state_dict holds the seed); the operators are ±1/sqrt(r) Rademacher
    matrices, the same for the same seed and different for another; the layer computes the formulation
    with them, and loads from its state_dict."""
    torch.manual_seed(0)
    a = SKLinear(24, 12, 2, 3, dtype=F64, seed=12345)
    sd = a.state_dict()
    assert set(sd) == {"S1s", "S2s", "bias", "seed", "operator_kind"} and int(sd["seed"]) == 12345
    u1, u2 = a.operators()
    assert u1.shape == (2, 3, 12) and u2.shape == (2, 24, 3)
    torch.testing.assert_close(u1.abs(), torch.full_like(u1, 1 / math.sqrt(3)), rtol=1e-7, atol=0)  # fp32 1/√r
    u1b, _ = SKLinear(24, 12, 2, 3, dtype=F64, seed=12345).operators()
    assert torch.equal(u1, u1b)
    assert not torch.equal(u1, SKLinear(24, 12, 2, 3, dtype=F64, seed=12346).operators()[0])
    assert not torch.equal(u1[0], u1[1])
    x = torch.randn(4, 24, generator=rng, dtype=F64)
    assert rel_err(a(x), reference.sketched_linear(x, a.S1s, a.S2s, u1, u2, a.bias)) <= 1e-13
    b = SKLinear(24, 12, 2, 3, dtype=F64, seed=1)
    b.load_state_dict(sd)
    assert torch.equal(a(x), b(x))
    y = a(x).sum()
    y.backward()
    assert a.S1s.grad.abs().sum() > 0 and a.S2s.grad.abs().sum() > 0
    # a new seed buffer (not written in place) is followed too: the state_dict and the forward agree
    b.seed = torch.tensor(9)
    c = SKLinear(24, 12, 2, 3, dtype=F64, seed=2)
    c.load_state_dict(b.state_dict())
    assert torch.equal(b(x), c(x)) and not torch.equal(b(x), a(x))
    for bad in (torch.tensor(-5), torch.tensor(2.5), torch.tensor([1, 2])):
        with pytest.raises(ValueError, match=r"\[SKLinear\] seed"):
            c.load_state_dict({**sd, "seed": bad})
    # the operators' kind travels with the seed: an SRHT layer's state_dict does not load into this one (nor
    # the other way round); a state_dict saved without the kind still loads
    srht = SKLinear(24, 12, 2, 3, dtype=F64, seed=12345, operator="srht")
    with pytest.raises(ValueError, match=r"\[SKLinear\] operator: the state_dict's layer has 'srht' operators, "
                                         r"this one 'rademacher'"):
        c.load_state_dict(srht.state_dict())
    with pytest.raises(ValueError, match=r"\[SKLinear\] operator: .* 'rademacher' operators, this one 'srht'"):
        srht.load_state_dict(sd)
    c.load_state_dict({k: v for k, v in sd.items() if k != "operator_kind"})
    assert torch.equal(c(x), a(x))
    # ensembling (vmap over functional_call): stacked seeds are refused by name, a shared one works
    params, buffers = torch.func.stack_module_state([a, b])
    call = lambda dims: torch.func.vmap(  # noqa: E731
        lambda p, bu, xx: torch.func.functional_call(a, (p, bu), (xx,)), in_dims=dims)(params, buffers, x)
    with pytest.raises(ValueError, match=r"\[SKLinear\] seed: .*vmap"):
        call((0, 0, None))
    buffers = {"seed": a.seed}
    torch.testing.assert_close(call((0, None, None))[0], a(x), rtol=1e-12, atol=1e-12)


def test_seeded_operators_are_the_seeds_sketch_matrices(backend):
    """A seeded layer's operators, written in place into one tensor, are bitwise the public
    sketch_matrix of each term's seed (U1: streams 0, 2, ...; U2: 1, 3, ..., transposed), on every
    backend; on the meta device (shapes only) they come through the op."""
    from swisk import testing
    from swisk.reference.sketched import term_seed
    from swisk.nn import SKConv2d

    dev, seed = testing.device_of(backend), 2**62 + 77
    layer = SKLinear(40, 24, 3, 5, seed=seed, device=dev)
    u1, u2 = layer.operators()
    for i in range(3):
        want1 = swisk.ops.sketch_matrix("rademacher", 5, 24, term_seed(seed, 2 * i), device=dev)
        want2 = swisk.ops.sketch_matrix("rademacher", 5, 40, term_seed(seed, 2 * i + 1), device=dev)
        assert torch.equal(u1[i], want1) and torch.equal(u2[i], want2.t())
    conv = SKConv2d(4, 6, 3, num_terms=2, low_rank=2, seed=seed, device=dev)
    got = conv.operators()
    for i in range(4):
        assert torch.equal(got[i], swisk.ops.sketch_matrix("rademacher", 2, 6, term_seed(seed, i), device=dev))
    m1, m2 = SKLinear(40, 24, 3, 5, seed=seed, device="meta").operators()
    assert m1.is_meta and m1.shape == (3, 5, 24) and m2.shape == (3, 40, 5)


def test_sketched_conv2d_forms_choose_by_multiply_adds():
    """The output-pixel count behind the choice matches conv2d's output for strides, paddings and
    padding modes; the bench's layer (L·r = 96 into 64 outputs) takes the kernel u·S1s, a sketch
    narrower than the outputs the L·r-channel convolution, and a tiny batch where forming the
    kernel costs more than it saves."""
    from swisk._ops.sketched import _check_geometry, _effective_kernel_is_cheaper
    x = torch.empty(3, 4, 11, 9)
    for kh, kw in ((3, 3), (5, 2)):
        s1 = torch.empty(6, 4, kh, kw)
        for stride, padding in ((1, 0), (2, 1), ((2, 3), (1, 2)), (1, "same"), (1, "valid"),
                                (np.int64(2), (np.int32(1), 2))):  # numpy's ints as torch takes them
            y = torch.nn.functional.conv2d(x, s1, None, stride, padding)
            pixels = _check_geometry("sketched_conv2d", x, s1, stride, padding)
            assert pixels == y.shape[0] * y.shape[2] * y.shape[3], (kh, kw, stride, padding)
    for (xs, s1s, padding, want) in (((32, 64, 32, 32), (96, 64, 3, 3), 1, True),
                                     ((32, 64, 32, 32), (16, 64, 3, 3), 1, False),
                                     ((1, 64, 1, 1), (96, 64, 1, 1), 0, False)):
        x, s1 = torch.empty(xs), torch.empty(s1s)
        assert _effective_kernel_is_cheaper(s1, 64, _check_geometry("sketched_conv2d", x, s1, 1, padding)) == want


def test_panther_sketch_operators_seeded():
    """swisk.compat.panther.sketch: Panther's signatures and scalings on the seeded Philox operators."""
    from swisk.compat.panther import sketch as sk
    s = sk.scaled_sign_sketch(16, 40, seed=5)
    assert s.shape == (16, 40) and torch.equal(s, sk.scaled_sign_sketch(16, 40, seed=5))
    torch.testing.assert_close(s.abs(), torch.full_like(s, 0.25))
    c = sk.count_skop(8, 50, seed=1)
    assert ((c != 0).sum(0) == 1).all() and set(c[c != 0].abs().tolist()) == {1.0}
    j = sk.sjlt_skop(8, 50, sparsity=3, seed=1)
    assert ((j != 0).sum(0) == 3).all()
    torch.testing.assert_close(j[j != 0].abs(), torch.full(((j != 0).sum(),), 3 ** -0.5))
    g = sk.gaussian_skop(64, 300, seed=2)
    assert abs(g.var().item() * 64 - 1) < 0.1
    d = sk.dense_sketch_operator(64, 300, sk.DistributionFamily.Gaussian, seed=2)
    torch.testing.assert_close(d, g * 8)
    u = sk.dense_sketch_operator(64, 300, sk.DistributionFamily.Uniform, seed=2)
    assert u.abs().max() <= 3 ** 0.5 and abs(u.var().item() - 1) < 0.1
    torch.manual_seed(0)
    a = sk.gaussian_skop(4, 6)
    torch.manual_seed(0)
    assert torch.equal(a, sk.gaussian_skop(4, 6))
    with pytest.raises(ValueError, match="distribution"):
        sk.dense_sketch_operator(4, 4, "cauchy")
    # bad sizes, seeds and inputs name Panther's function and argument
    for call, msg in ((lambda: sk.dense_sketch_operator(-1, 5, "uniform", seed=1), r"\[dense_sketch_operator\] m"),
                      (lambda: sk.dense_sketch_operator(4, 5, "uniform", seed=-3), r"\[dense_sketch_operator\] seed"),
                      (lambda: sk.dense_sketch_operator(4, 5, "gaussian", seed=2**64), r"\[dense_sketch_operator\] seed"),
                      (lambda: sk.gaussian_skop(0, 5), r"\[gaussian_skop\] m"),
                      (lambda: sk.count_skop(3, -2), r"\[count_skop\] d"),
                      (lambda: sk.sjlt_skop(2, 30, sparsity=3), r"\[sjlt_skop\] sparsity"),
                      (lambda: sk.srht(torch.tensor(1.0), 1, seed=1), r"\[srht\] x")):
        with pytest.raises(ValueError, match=msg):
            call()
    with pytest.raises(TypeError, match=r"\[srht\] x"):
        sk.srht([1.0, 2.0], 1, seed=1)
    x = torch.randn(64, dtype=F64)
    y = sk.srht(x, 16, seed=3)  # Panther's normalisation: an orthonormal H, then 16 of its 64 entries
    assert y.shape == (16,) and torch.equal(y, sk.srht(x, 16, seed=3))
    full = sk.srht(x, 64, seed=3)
    assert abs(full.norm().item() - x.norm().item()) < 1e-10
    with pytest.raises(ValueError, match=r"\[srht\] x"):
        sk.srht(torch.randn(12), 4)


def _panther_conv_init(seed, c, o, k, t, r):
    """Panther's SKConv2d initialisation, draw by draw: U1s (2T draws of rand(r, out)), kernels (C, kh, kw,
    out) kaiming-uniform, bias uniform(±1/sqrt(fan_in of the kernels)), S1s from kernels·U1ᵀ."""
    torch.manual_seed(seed)
    u1 = torch.stack([torch.sign(torch.rand(r, o) - 0.5) / math.sqrt(r) for _ in range(2 * t)])
    kern = torch.empty(c, k, k, o)
    torch.nn.init.kaiming_uniform_(kern, a=math.sqrt(5))
    fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(kern)
    bias = torch.empty(o).uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
    s1 = torch.stack([(kern @ u1[i].T).reshape(-1, r) for i in range(2 * t)]).permute(0, 2, 1)
    return {"U1s": u1, "bias": bias, "S1s": s1.reshape(2 * t * r, c, k, k)}


def test_skconv2d_as_panther(rng):
    from swisk.compat.panther import SKConv2d
    want = _panther_conv_init(11, 3, 5, 3, 2, 4)
    torch.manual_seed(11)
    layer = SKConv2d(3, 5, (3, 3), num_terms=2, low_rank=4)
    sd = layer.state_dict()
    assert set(sd) == set(want)
    for k, v in want.items():
        torch.testing.assert_close(sd[k], v, rtol=0, atol=0)
    layer = layer.double()
    x = torch.randn(2, 3, 9, 7, generator=rng, dtype=F64, requires_grad=True)
    y = layer(x)
    ref = reference.sketched_conv2d(x, layer.S1s, layer.U1s, layer.bias, (1, 1), (1, 1))
    assert y.shape == (2, 5, 9, 7) and rel_err(y, ref) <= 1e-13
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    moving = [x, layer.S1s, layer.bias]
    for a, b in zip(torch.autograd.grad(y, moving, go), torch.autograd.grad(ref, moving, go)):
        assert rel_err(a, b) <= 1e-12


def test_skconv2d_from_torch_and_seed(rng):
    from swisk.compat.panther import SKConv2d
    torch.manual_seed(2)
    conv = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1).double()
    sk = SKConv2d.fromTorch(conv, num_terms=16, low_rank=64)
    assert sk.stride == (2, 2) and sk.padding == (1, 1) and torch.equal(sk.bias, conv.bias)
    x = torch.randn(2, 4, 8, 8, generator=rng, dtype=F64)
    want = conv(x)
    assert rel_err(sk(x), want) < 0.2  # (1/L)·Σ U_iᵀU_i -> I: the sketch approximates the convolution
    seeded = SKConv2d.fromTorch(conv, num_terms=2, low_rank=4, seed=9)
    assert set(seeded.state_dict()) == {"S1s", "bias", "seed"}
    again = SKConv2d.fromTorch(conv, num_terms=2, low_rank=4, seed=9)
    assert torch.equal(seeded(x), again(x))
    with pytest.raises(ValueError, match=r"\[SKConv2d\] layer"):
        SKConv2d.fromTorch(torch.nn.Conv2d(4, 6, 3, groups=2), 1, 2)
    with pytest.raises(ValueError, match=r"\[SKConv2d\] padding"):
        SKConv2d(4, 6, padding="full")
    with pytest.raises(ValueError, match=r"\[sketched_conv2d\] x"):
        sk(torch.randn(2, 3, 8, 8, dtype=F64))
    with pytest.raises(ValueError, match=r"\[SKConv2d\] layer: needs .* padding_mode"):
        SKConv2d.fromTorch(torch.nn.Conv2d(4, 6, 3, padding=1, padding_mode="reflect"), 1, 2)
    with pytest.raises(ValueError, match=r"\[SKConv2d\] layer: its weight"):
        SKConv2d(4, 6, 5, num_terms=1, low_rank=2, layer=torch.nn.Conv2d(4, 6, 3))
    for kw, arg in ((dict(stride=0), "stride"), (dict(stride=(1, -1)), "stride"), (dict(padding=-1), "padding"),
                    (dict(kernel_size=0), "kernel_size"), (dict(kernel_size=(0, 3)), "kernel_size"),
                    (dict(padding="same", stride=2), "padding")):
        with pytest.raises(ValueError, match=rf"\[SKConv2d\] {arg}"):
            SKConv2d(4, 6, num_terms=1, low_rank=2, **kw)
    # 'same' keeps the size with even kernels too (torch's padding; Panther's (k-1)//2 would not), and
    # fromTorch of such a convolution keeps its output shape; an empty batch gives an empty output
    even = torch.nn.Conv2d(4, 6, (2, 4), padding="same").double()
    sk2 = SKConv2d.fromTorch(even, num_terms=16, low_rank=64)
    assert sk2(x).shape == even(x).shape == (2, 6, 8, 8) and rel_err(sk2(x), even(x)) < 0.2
    assert SKConv2d(4, 6, 3, num_terms=1, low_rank=2, padding="same").padding == (1, 1)  # Panther's, odd kernels
    assert sk(torch.randn(0, 4, 8, 8, dtype=F64)).shape == (0, 6, 4, 4)


@pytest.mark.parametrize("terms, r, out", [(3, 2, 4), (1, 2, 8)])
def test_sketched_conv2d_derivatives_and_errors(rng, terms, r, out):
    """sketched_conv2d against Panther's formulation on both of its forms (L·r = 6 sketch channels into 4
    outputs: the kernel u·S1s; 2 into 8: the L·r-channel convolution): gradcheck, gradgradcheck and
    forward-mode tangents in fp64; bad inputs name the argument."""
    from swisk._ops.sketched import _check_geometry, _effective_kernel_is_cheaper
    x = torch.randn(2, 3, 5, 4, generator=rng, dtype=F64, requires_grad=True)
    s1 = torch.randn(terms * r, 3, 3, 3, generator=rng, dtype=F64, requires_grad=True)
    u1 = torch.sign(torch.randn(terms, r, out, generator=rng, dtype=F64)).requires_grad_()
    b = torch.randn(out, generator=rng, dtype=F64, requires_grad=True)
    assert _effective_kernel_is_cheaper(s1, out, _check_geometry("sketched_conv2d", x, s1, 2, 1)) == (terms * r > out)
    f = lambda x, s1, u1, b: swisk.ops.sketched_conv2d(x, s1, u1, b, 2, 1)  # noqa: E731
    r = lambda x, s1, u1, b: reference.sketched_conv2d(x, s1, u1, b, 2, 1)  # noqa: E731
    assert rel_err(f(x, s1, u1, b), r(x, s1, u1, b)) <= 1e-13
    assert torch.autograd.gradcheck(f, (x, s1, u1, b))
    assert torch.autograd.gradgradcheck(f, (x, s1, u1, b))
    t = torch.randn(x.shape, generator=rng, dtype=F64)
    _, jv = torch.func.jvp(lambda x: f(x, s1, u1, b), (x,), (t,))
    _, want = torch.func.jvp(lambda x: r(x, s1, u1, b), (x,), (t,))
    assert rel_err(jv, want) <= 1e-12
    op = swisk.ops.sketched_conv2d
    cases = [
        (lambda: op(x, s1[:1], u1, b), ValueError, r"\[sketched_conv2d\] S1s"),
        (lambda: op(x[:, :2], s1, u1, b), ValueError, r"\[sketched_conv2d\] x"),
        (lambda: op(x, s1, u1, b[:3]), ValueError, r"\[sketched_conv2d\] bias"),
        (lambda: op(x.float(), s1, u1, b), TypeError, r"\[sketched_conv2d\] S1s"),
        (lambda: op(x, "S1s", u1, b), TypeError, r"\[sketched_conv2d\] S1s"),
        (lambda: op(x, s1[:0], u1[:, :0], b), ValueError, r"\[sketched_conv2d\] S1s"),
        (lambda: op(x, s1, u1, b, 0, 1), ValueError, r"\[sketched_conv2d\] stride"),
        (lambda: op(x, s1, u1, b, (1, 1, 1), 1), TypeError, r"\[sketched_conv2d\] stride"),
        (lambda: op(x, s1, u1, b, 1, -1), ValueError, r"\[sketched_conv2d\] padding"),
        (lambda: op(x, s1, u1, b, 1, "full"), ValueError, r"\[sketched_conv2d\] padding"),
        (lambda: op(x, s1, u1, b, 2, "same"), ValueError, r"\[sketched_conv2d\] padding"),
        (lambda: op(x[..., :2, :2], s1, u1, b, 1, 0), ValueError, r"\[sketched_conv2d\] x"),
        (lambda: op(x[..., :0], s1, u1, b, 2, 1), ValueError, r"\[sketched_conv2d\] x: spatial sizes"),
        # past 2^31 torch's convolution fails with no name (error fuzzer seed 2763)
        (lambda: op(x, s1, u1, b, 2, 2**31), ValueError, r"\[sketched_conv2d\] padding: the padded size"),
        (lambda: op(x, s1, u1, b, 2, (1, 2**30)), ValueError, r"\[sketched_conv2d\] padding: the padded size"),
        (lambda: op(x, s1, u1, b, 2, 2**25), ValueError, r"\[sketched_conv2d\] padding: the padded input"),
        (lambda: op(x, s1, u1, b, 2**31, 1), ValueError, r"\[sketched_conv2d\] stride"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()
    # no outputs: an empty result on both forms
    assert op(x, s1, u1[..., :0], b[:0], 2, 1).shape == (2, 0, 3, 2)
