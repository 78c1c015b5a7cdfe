"""swisk.ops.fwht and swisk.ops.srht (the sketch family's Hadamard side) against swisk.reference.sketch."""
import math

import pytest
import torch

import swisk
from swisk import testing
from swisk.reference import sketch as ref


def host(backend):
    return backend in ("cpu", "cuda-emu", "metal-emu")


def bad(exc, match, fn, *args, **kw):
    with pytest.raises(exc, match=match):
        fn(*args, **kw)


# ---- FWHT ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fwht_is_the_hadamard_matrix(backend, rng, dtype):
    if dtype == torch.float64 and backend != "cpu":
        pytest.skip("float64 is CPU-only")
    dev = testing.device_of(backend)
    for n in (1, 2, 64, 4096, 16384):  # 16384: Metal's chunk and one register pass; CUDA's chunk of 2^14
        x = torch.randn(2, 3, n, generator=rng, dtype=torch.float64).to(dtype)  # the reference sees the rounded x
        want = x.double() @ ref.hadamard(n).T * 0.25 if n <= 4096 else ref.fwht(x.double(), 0.25)
        y = swisk.ops.fwht(x.to(dev), 0.25)
        assert y.dtype == dtype and y.shape == x.shape
        rel = ((y.cpu().double() - want).abs().max() / want.abs().max()).item()
        assert rel < {torch.float64: 1e-14, torch.float32: 1e-6, torch.bfloat16: 3e-2}[dtype] * max(1, math.log2(n)), n


def test_fwht_is_bitwise_the_radix2_butterflies(backend, rng):
    """Every backend adds in the radix-2 order (the CPU in 32-byte vectors, chunks and radix-4 passes):
    bitwise the reference's butterflies, at every n through 2^16 and at 2^18 and 2^19 (the CPU's
    in-vector, in-chunk and across-chunk stages; the GPUs' chunk pass, whose three register layouts cover
    distances 2^0-2^4, 2^5-2^9 and 2^(L-5)-2^(L-1) for chunks of 2^L, L = 13 (Metal) and up to 15 (CUDA:
    512 and 1024 threads for 2^14 and 2^15), and one or two register passes past them) in both float dtypes."""
    dev = testing.device_of(backend)
    for dtype in testing.dtypes_of(backend):
        if dtype in (torch.float16, torch.bfloat16):
            continue
        for e in range(17):
            x = torch.randn(3, 2**e, generator=rng, dtype=dtype)
            got = swisk.ops.fwht(x.to(dev), 0.37).cpu()
            assert torch.equal(got, ref.fwht(x, 0.37)), (dtype, 2**e)
            # in place on a strided view's copy: the rows of a transposed input
            xt = torch.randn(2**e, 3, generator=rng, dtype=dtype).T
            assert torch.equal(swisk.ops.fwht(xt.to(dev), 0.37).cpu(), ref.fwht(xt, 0.37)), (dtype, 2**e)
        for e in (18, 19):
            x = torch.randn(1, 2**e, generator=rng, dtype=dtype)
            assert torch.equal(swisk.ops.fwht(x.to(dev), 0.37).cpu(), ref.fwht(x, 0.37)), (dtype, 2**e)


def test_fwht_orthonormal_is_its_own_inverse(backend, rng):
    dev = testing.device_of(backend)
    x = torch.randn(5, 1024, generator=rng).to(dev)
    s = 1024 ** -0.5
    torch.testing.assert_close(swisk.ops.fwht(swisk.ops.fwht(x, s), s), x, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(swisk.ops.fwht(x), swisk.ops.fwht(x, None))


def test_fwht_derivatives(rng):
    x = torch.randn(3, 16, generator=rng, dtype=torch.float64, requires_grad=True)
    f = lambda x: swisk.ops.fwht(x, 0.3)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))
    t = torch.randn(3, 16, generator=rng, dtype=torch.float64)
    y, jt = torch.func.jvp(f, (x.detach(),), (t,))
    torch.testing.assert_close(jt, f(t))
    torch.testing.assert_close(torch.func.vmap(f)(x.detach().view(3, 1, 16)), f(x.detach()).view(3, 1, 16))
    torch.library.opcheck(torch.ops.swisk.fwht.default, (x, 0.3))

    @torch.compile(fullgraph=True)
    def g(x):
        return swisk.ops.fwht(x.sin(), 0.5).square().sum()

    torch.testing.assert_close(g(x), ref.fwht(x.sin(), 0.5).square().sum())


def test_fwht_bad_inputs(backend):
    if not host(backend):
        pytest.skip("host backends")
    bad(ValueError, r"\[fwht\] x: the last dimension must be a power of two below 2\^31, got 12", swisk.ops.fwht,
        torch.randn(2, 12))
    bad(ValueError, r"\[fwht\] x: the last dimension must be a power of two", swisk.ops.fwht, torch.randn(2, 0))
    bad(ValueError, r"\[fwht\] x: must be \(\.\.\., n\)", swisk.ops.fwht, torch.tensor(1.0))
    bad(TypeError, r"\[fwht\] scale: expected a float or None, got str", swisk.ops.fwht, torch.randn(4), "a")
    bad(ValueError, r"\[fwht\] scale: must be finite", swisk.ops.fwht, torch.randn(4), math.inf)
    bad(ValueError, r"\[fwht\] scale: must be finite", swisk.ops.fwht, torch.randn(4), -(10**400))  # no float
    for dtype in (torch.float32, torch.bfloat16):  # finite, but not in the kernels' float32
        bad(ValueError, r"\[fwht\] scale: must be within float32's range", swisk.ops.fwht, torch.ones(4, dtype=dtype),
            1e300)
    if backend == "cpu":
        want = torch.tensor([4e300, 0.0, 0.0, 0.0], dtype=torch.float64)
        assert torch.equal(swisk.ops.fwht(torch.ones(4, dtype=torch.float64), 1e300), want)
    bad(TypeError, r"\[fwht\] x: expected a floating-point tensor", swisk.ops.fwht, torch.ones(4, dtype=torch.int32))
    if backend != "cpu":
        bad(TypeError, "float64 is not supported on the GPU", swisk.ops.fwht, torch.randn(4, dtype=torch.float64))


# ---- SRHT ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_srht_is_its_matrix(backend, rng, dtype):
    if dtype == torch.float64 and backend != "cpu":
        pytest.skip("float64 is CPU-only")
    dev = testing.device_of(backend)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    for n, k in ((1, 1), (6, 6), (37, 5), (64, 20), (300, 33), (5000, 17)):  # 5000: padded past a GPU chunk
        seed = int(torch.randint(0, 2**56, (), generator=rng))
        S = ref.srht_matrix(k, n, seed)
        x = torch.randn(2, 3, n, generator=rng, dtype=torch.float64).to(dtype)  # the reference sees the rounded x
        y = swisk.ops.srht(x.to(dev), k, seed)
        assert y.shape == (2, 3, k) and y.dtype == dtype
        torch.testing.assert_close(y.cpu().double(), x.double() @ S.T, rtol=tol, atol=tol)
        g = torch.randn(4, k, generator=rng, dtype=torch.float64).to(dtype)
        gx = torch.ops.swisk.srht_transpose(g.to(dev), n, seed)
        torch.testing.assert_close(gx.cpu().double(), g.double() @ S, rtol=tol, atol=tol)


def test_srht_rows_are_a_permutation():
    for n in (1, 2, 8, 100, 1024, 3000):  # odd and even bit counts (the odd ones walk the cycle)
        big_n = ref._pow2_at_least(n)
        rows = ref.srht_rows(big_n, n, 5)
        assert torch.equal(rows.sort().values, torch.arange(big_n))
        assert not torch.equal(rows, ref.srht_rows(big_n, n, 6)) or big_n <= 2


def test_srht_cpu_is_the_gpu_kernels_bitwise_at_any_thread_count(rng):
    """The CPU's row-by-row SRHT (its kept-row table from vectorised Feistel passes, chunked across threads,
    the walk back into [0, N) included) gives the emulated GPU passes' values exactly, either direction."""
    threads = torch.get_num_threads()
    try:
        for n, k in ((5000, 3000), (2048, 2048), (1000, 999), (3, 2)):  # 13, 11, 10 and 2 bits
            seed = int(torch.randint(0, 2**62, (), generator=rng))
            x, g = torch.randn(5, n, generator=rng), torch.randn(5, k, generator=rng)
            want = {}
            for backend in ("cuda-emu", "cpu"):
                with testing.backend(backend):
                    for t in (1, 2):
                        torch.set_num_threads(t)
                        got = (swisk.ops.srht(x, k, seed), torch.ops.swisk.srht_transpose(g, n, seed))
                        for a, b in zip(got, want.setdefault("y", got)):
                            assert torch.equal(a, b), (n, k, backend, t)
            torch.testing.assert_close(want["y"][0].double(), ref.srht(x.double(), k, seed), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(want["y"][1].double(), ref.srht_transpose(g.double(), n, seed), rtol=1e-5,
                                       atol=1e-5)
    finally:
        torch.set_num_threads(threads)


def test_srht_johnson_lindenstrauss():
    x = torch.randn(100, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ratios = torch.stack([swisk.ops.srht(x, 16, seed).square().sum() for seed in range(300)]) / x.square().sum()
    assert abs(ratios.mean().item() - 1) < 0.1, ratios.mean().item()


def test_srht_derivatives(rng):
    x = torch.randn(3, 20, generator=rng, dtype=torch.float64, requires_grad=True)
    f = lambda x: swisk.ops.srht(x, 7, 3)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))
    t = torch.randn(3, 20, generator=rng, dtype=torch.float64)
    torch.testing.assert_close(torch.func.jvp(f, (x.detach(),), (t,))[1], f(t))
    torch.testing.assert_close(torch.func.jacrev(f)(x[0].detach()), ref.srht_matrix(7, 20, 3))
    torch.testing.assert_close(torch.func.vmap(f)(x.detach().view(3, 1, 20)), f(x.detach()).view(3, 1, 7))
    torch.library.opcheck(torch.ops.swisk.srht.default, (x, 7, 3))
    torch.library.opcheck(torch.ops.swisk.srht_transpose.default, (torch.randn(3, 7, generator=rng), 20, 3))

    @torch.compile(fullgraph=True)
    def g(x):
        return swisk.ops.srht(x.cos(), 7, 3).sum()

    torch.testing.assert_close(g(x), ref.srht(x.cos(), 7, 3).sum())


def test_srht_bad_inputs(backend):
    if not host(backend):
        pytest.skip("host backends")
    x = torch.randn(2, 10)
    bad(ValueError, r"\[srht\] k: must be in \[1, n\] = \[1, 10\], got 11", swisk.ops.srht, x, 11, 0)
    bad(ValueError, r"\[srht\] k: must be in \[1", swisk.ops.srht, x, 0, 0)
    bad(ValueError, r"\[srht\] seed: must be a non-negative int below 2\^63", swisk.ops.srht, x, 3, -2)
    bad(TypeError, r"\[srht\] k: expected an int", swisk.ops.srht, x, 3.0, 0)
    bad(TypeError, r"\[srht\] x: expected a floating-point tensor", swisk.ops.srht, torch.ones(2, 4, dtype=torch.int64), 2, 0)
    if backend != "cpu":
        bad(TypeError, "float64 is not supported on the GPU", swisk.ops.srht, x.double(), 3, 0)
