"""srht_sketched_linear (Panther's layer math with seeded SRHT operators applied through the FWHT) and
SKLinear(operator="srht") against swisk.reference.srht_sketched_linear (the same operators materialised,
Panther's formulation), on every backend present."""
import math
import warnings

import pytest
import torch

import swisk
from swisk import reference, testing
from swisk.nn import SKConv2d, SKLinear
from swisk.reference.sketched import srht_blocks

F64 = torch.float64
op = swisk.ops.srht_sketched_linear
# the small test layers have more parameters than a dense one, as SKLinear warns
pytestmark = pytest.mark.filterwarnings("ignore:The sketching layer uses more parameters:UserWarning")


def rel_err(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30)).item()


def factors(rng, t, fin, fout, r, dtype=F64, bias=True):
    g = lambda *s: torch.randn(*s, generator=rng, dtype=F64).to(dtype)  # noqa: E731
    return [g(t, fin, r), g(t, r, fout), g(fout) if bias else None]


def test_blocks():
    """As few blocks as keep each within n rows, terms split evenly (the scheme the operators follow)."""
    assert srht_blocks(8, 128, 2048) == [8] and srht_blocks(8, 128, 1024) == [8]
    assert srht_blocks(6, 96, 512) == [3, 3] and srht_blocks(8, 7, 24) == [3, 3, 2]
    assert srht_blocks(5, 4, 4) == [1] * 5 and srht_blocks(1, 3, 3) == [1]


# (T, in, out, r): one block each way; several blocks of equal and of unequal size; widths that are not
# powers of two; r = in = out
SIZES = [(1, 5, 3, 2), (3, 17, 9, 5), (8, 40, 24, 7), (5, 9, 30, 4), (2, 6, 6, 6), (4, 64, 32, 8)]


# relative error bound against the fp64 formulation, per dtype (fp16/bf16: the GEMMs and FWHTs in
# the dtype, accumulating in fp32)
BOUND = {F64: 1e-12, torch.float32: 2e-5, torch.float16: 1e-2, torch.bfloat16: 5e-2}


@pytest.mark.parametrize("t,fin,fout,r", SIZES)
def test_matches_the_formulation(backend, rng, t, fin, fout, r):
    dev = testing.device_of(backend)
    seed = int(torch.randint(0, 2**62, (), generator=rng))
    s1, s2, b = factors(rng, t, fin, fout, r)
    x = torch.randn(3, 11, fin, generator=rng, dtype=F64)
    go = torch.randn(3, 11, fout, generator=rng, dtype=F64)
    for dtype in testing.dtypes_of(backend):
        # the formulation on the rounded inputs
        want = [p.to(dtype).double().detach().requires_grad_() for p in (x, s1, s2, b)]
        y_want = reference.srht_sketched_linear(*want[:3], seed, want[3])
        g_want = torch.autograd.grad(y_want, want, go.to(dtype).double())
        got = [p.detach().to(dev, dtype).requires_grad_() for p in (x, s1, s2, b)]
        y = op(*got[:3], seed, got[3])
        assert y.shape == (3, 11, fout) and y.dtype == dtype
        assert rel_err(y.cpu(), y_want) <= BOUND[dtype], dtype
        grads = torch.autograd.grad(y, got, go.to(dev, dtype))
        for a, w in zip(grads, g_want):
            assert rel_err(a.cpu(), w) <= BOUND[dtype], dtype
    x32, s132, s232 = (p.to(dev, torch.float32) for p in (x, s1, s2))
    want = reference.srht_sketched_linear(*(p.cpu().double() for p in (x32, s132, s232)), seed)
    assert rel_err(op(x32, s132, s232, seed).cpu(), want) <= 2e-5


@pytest.mark.parametrize("t,fin,fout,r", SIZES[1:4])
def test_operators_are_the_formulations_and_hadamard_rows(backend, t, fin, fout, r):
    """The materialised operators equal the reference's; entries ±1/√r (to fp32 rounding of 1/√k); each
    block's rows are distinct rows of one Hadamard transform, orthogonal where n is a power of two."""
    dev, dtype = testing.device_of(backend), testing.dtypes_of(backend)[0]
    bound = 1e-15 if dtype == F64 else 1e-7
    u1, u2 = swisk.ops.srht_sketched_operators(t, r, fin, fout, 77, dtype, dev)
    v1, v2 = reference.sketched.srht_sketched_operators(t, r, fin, fout, 77)
    assert u1.shape == (t, r, fout) and u2.shape == (t, fin, r) and u1.dtype == dtype
    assert rel_err(u1.cpu(), v1) <= bound and rel_err(u2.cpu(), v2) <= bound
    torch.testing.assert_close(u1.cpu().double().abs() * math.sqrt(r), torch.ones(u1.shape, dtype=F64), rtol=2e-7,
                               atol=0)
    n = 64
    u = swisk.ops.srht_sketched_operators(t, r, n, n, 5, dtype, dev)[0].cpu().double().reshape(t * r, n)
    row = 0
    for terms in srht_blocks(t, r, n):
        blk = u[row:row + terms * r]
        torch.testing.assert_close(blk @ blk.T, torch.eye(terms * r, dtype=F64) * n / r, rtol=4e-7, atol=1e-12)
        row += terms * r


def test_known_answer():
    """T = r = 1, in = out = 2, seed 0: U1 = [1, -1], U2 = [-1, 1]ᵀ (pinned), so with x = [2, 3], S1 = [5, 7]ᵀ,
    S2 = [11, 13], b = [.5, -.5]: y = ((31·[1, -1]) + (1·[11, 13])) / 2 + b = [21.5, -9.5]."""
    u1, u2 = swisk.ops.srht_sketched_operators(1, 1, 2, 2, 0, F64)
    assert u1.flatten().tolist() == [1.0, -1.0] and u2.flatten().tolist() == [-1.0, 1.0]
    y = op(torch.tensor([[2.0, 3.0]], dtype=F64), torch.tensor([[[5.0], [7.0]]], dtype=F64),
           torch.tensor([[[11.0, 13.0]]], dtype=F64), 0, torch.tensor([0.5, -0.5], dtype=F64))
    assert y.tolist() == [[21.5, -9.5]]


def test_gradcheck_gradgradcheck_jvp_vmap_compile(rng):
    s1, s2, b = (p.requires_grad_() for p in factors(rng, 3, 6, 5, 2))
    x = torch.randn(4, 6, generator=rng, dtype=F64, requires_grad=True)
    f = lambda x, s1, s2, b: op(x, s1, s2, 9, b)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x, s1, s2, b))
    assert torch.autograd.gradgradcheck(f, (x, s1, s2, b))
    tangents = tuple(torch.randn(p.shape, generator=rng, dtype=F64) for p in (x, s1, s2, b))
    _, jv = torch.func.jvp(f, (x, s1, s2, b), tangents)
    _, want = torch.func.jvp(lambda *a: reference.srht_sketched_linear(*a[:3], 9, a[3]), (x, s1, s2, b), tangents)
    assert rel_err(jv, want) <= 1e-12
    xs = torch.randn(5, 4, 6, generator=rng, dtype=F64)
    want = reference.srht_sketched_linear(xs, s1, s2, 9, b)
    assert rel_err(torch.func.vmap(lambda x: f(x, s1, s2, b))(xs), want) <= 1e-12
    g = torch.func.grad(lambda s1: f(x, s1, s2, b).square().sum())(s1)
    loss = reference.srht_sketched_linear(x, s1, s2, 9, b).square().sum()
    assert rel_err(g, torch.autograd.grad(loss, s1)[0]) <= 1e-12
    p32 = [p.detach().float() for p in (s1, s2, b)]
    compiled = torch.compile(lambda x: op(x, p32[0], p32[1], 9, p32[2]), fullgraph=True)
    assert rel_err(compiled(x.detach().float()), op(x.detach().float(), *p32[:2], 9, p32[2])) <= 1e-6


def test_fp32_and_bf16_error_bounds(rng):
    s1, s2, b = factors(rng, 4, 96, 48, 12)
    x = torch.randn(64, 96, generator=rng, dtype=F64)
    want = {dt: reference.srht_sketched_linear(*(p.to(dt).double() for p in (x, s1, s2)), 3, b.to(dt).double())
            for dt in (torch.float32, torch.bfloat16)}  # the formulation on the rounded inputs
    y32 = op(x.float(), s1.float(), s2.float(), 3, b.float())
    assert y32.dtype == torch.float32 and rel_err(y32, want[torch.float32]) <= 1e-5
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yb = op(x.float(), s1.float(), s2.float(), 3, b.float())
    assert yb.dtype == torch.bfloat16 and rel_err(yb, want[torch.bfloat16]) <= 1e-2


def test_bad_inputs(rng):
    s1, s2, b = factors(rng, 2, 6, 4, 3)
    x = torch.randn(2, 6, dtype=F64)
    cases = [
        (lambda: op(x[:, :5], s1, s2, 1, b), ValueError, r"\[srht_sketched_linear\] x"),
        (lambda: op(x, s1, s2[:1], 1, b), ValueError, r"\[srht_sketched_linear\] S2s"),
        (lambda: op(x, s1, s2, 1, b[:3]), ValueError, r"\[srht_sketched_linear\] bias"),
        (lambda: op(x.float(), s1, s2, 1, b), TypeError, r"\[srht_sketched_linear\] S1s"),
        (lambda: op(x, s1.int(), s2, 1, b), TypeError, r"\[srht_sketched_linear\] S1s"),
        (lambda: op(x, s1, s2, -1, b), ValueError, r"\[srht_sketched_linear\] seed"),
        (lambda: op(x, s1, s2, 1 << 63, b), ValueError, r"\[srht_sketched_linear\] seed"),
        (lambda: op(x, s1, s2, 1.0, b), TypeError, r"\[srht_sketched_linear\] seed"),
        (lambda: op(x, *factors(rng, 2, 6, 4, 5)[:2], 1), ValueError, r"\[srht_sketched_linear\] S1s: low rank"),
        (lambda: swisk.ops.srht_sketched_operators(2, 5, 6, 4, 1), ValueError, r"\[srht_sketched_operators\] low_rank"),
        (lambda: swisk.ops.srht_sketched_operators(0, 2, 6, 4, 1), ValueError,
         r"\[srht_sketched_operators\] num_terms"),
        (lambda: swisk.ops.srht_sketched_operators(2, 2, 6, 4, -3), ValueError, r"\[srht_sketched_operators\] seed"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()


def test_layer(rng):
    """SKLinear(operator="srht"): the seed is the state (no U1s/U2s), the forward is the op, the
    initialisation S1 = W·U1ᵀ, S2 = U2ᵀ·W with the materialised operators, load_state_dict restores it."""
    torch.manual_seed(0)
    a = SKLinear(40, 24, 3, 5, dtype=F64, seed=321, operator="srht")
    assert set(a.state_dict()) == {"S1s", "S2s", "bias", "seed", "operator_kind"} and "operator='srht'" in repr(a)
    u1, u2 = a.operators()
    assert rel_err(u1, swisk.ops.srht_sketched_operators(3, 5, 40, 24, 321, F64)[0]) == 0
    x = torch.randn(7, 40, generator=rng, dtype=F64)
    assert rel_err(a(x), reference.sketched_linear(x, a.S1s, a.S2s, u1, u2, a.bias)) <= 1e-13
    w = torch.randn(24, 40, generator=rng, dtype=F64)
    c = SKLinear(40, 24, 3, 5, W_init=w, dtype=F64, seed=4, operator="srht")
    v1, v2 = c.operators()
    for i in range(3):
        torch.testing.assert_close(c.S1s[i], w.T @ v1[i].T)
        torch.testing.assert_close(c.S2s[i], v2[i].T @ w.T)
    b = SKLinear(40, 24, 3, 5, dtype=F64, seed=1, operator="srht")
    b.load_state_dict(a.state_dict())
    assert torch.equal(a(x), b(x))
    a(x).sum().backward()
    assert a.S1s.grad.abs().sum() > 0 and a.S2s.grad.abs().sum() > 0 and a.bias.grad.abs().sum() > 0
    torch.manual_seed(5)
    d = SKLinear(40, 24, 3, 5, operator="srht")  # a seed drawn from torch's generator
    torch.manual_seed(5)
    assert int(d.seed) == int(SKLinear(40, 24, 3, 5, operator="srht").seed)


def test_layer_reproduces_w_init_when_the_blocks_are_whole_hadamard_transforms(rng):
    """T·r a multiple of power-of-two widths: Σ_b U_bᵀU_b = T·I each way, so at initialisation the layer
    is x·Wᵀ exactly (to rounding), where Rademacher operators only approximate it."""
    w = torch.randn(32, 64, generator=rng, dtype=F64)
    x = torch.randn(9, 64, generator=rng, dtype=F64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        exact = SKLinear(64, 32, 4, 16, W_init=w, bias=False, dtype=F64, seed=2, operator="srht")
        approx = SKLinear(64, 32, 4, 16, W_init=w, bias=False, dtype=F64, seed=2)
    assert rel_err(exact(x), x @ w.T) <= 1e-6  # fp32-rounded 1/√k scales
    assert rel_err(approx(x), x @ w.T) > 1e-2


def test_layer_bad_arguments():
    with pytest.raises(ValueError, match=r"\[SKLinear\] operator"):
        SKLinear(8, 8, 1, 2, operator="gaussian")
    with pytest.raises(ValueError, match=r"\[SKLinear\] low_rank"):
        SKLinear(8, 4, 1, 5, operator="srht")
    with pytest.raises(ValueError, match=r"\[SKLinear\] seed"):
        SKLinear(8, 8, 1, 2, seed=-1, operator="srht")


@pytest.mark.parametrize("operator", ["rademacher", "srht"])
def test_seeded_layers_compile_without_graph_breaks(rng, operator):
    """The seed is read as a Python int (no .item() on the buffer): fullgraph compiles, also after a load."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        layer = SKLinear(24, 12, 2, 3, seed=5, operator=operator)
        other = SKLinear(24, 12, 2, 3, seed=6, operator=operator)
    other.load_state_dict(layer.state_dict())
    x = torch.randn(4, 24, generator=rng)
    torch.testing.assert_close(torch.compile(other, fullgraph=True)(x), layer(x), rtol=1e-5, atol=1e-6)
    other.seed.fill_(11)  # an in-place write (as DDP's broadcast): the next eager forward reads it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        eleven = SKLinear(24, 12, 2, 3, seed=11, operator=operator)
    eleven.load_state_dict({k: v for k, v in other.state_dict().items()})
    torch.testing.assert_close(other(x), eleven(x), rtol=0, atol=0)
    assert not torch.equal(other(x), layer(x))
    conv = SKConv2d(3, 4, 3, seed=3)
    xc = torch.randn(2, 3, 8, 8, generator=rng)
    torch.testing.assert_close(torch.compile(conv, fullgraph=True)(xc), conv(xc))


def test_flops_count_the_gemms_and_the_transforms(rng):
    """FlopCounterMode: the two GEMMs (2·B·in·T·r + 2·B·T·r·out) and the two SRHTs (B·N·log2 N each)."""
    x, s1, s2 = (torch.randn(*s, generator=rng) for s in ((4, 20), (2, 20, 3), (2, 3, 6)))
    with torch.utils.flop_counter.FlopCounterMode(display=False) as counter:
        op(x, s1, s2, 5)
    assert counter.get_total_flops() == 2 * 4 * 20 * 6 + 2 * 4 * 6 * 6 + 4 * 32 * 5 + 4 * 8 * 3
