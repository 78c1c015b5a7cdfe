"""swisk.ops.sketch / sketch_matrix against swisk.reference.sketch on every backend."""
import os
import re
import subprocess
import sys

import pytest
import torch

import swisk
from swisk import testing
from swisk._ops import sketch as sketch_ops
from swisk.reference import sketch as ref
from swisk.reference.sketched import term_seed

KINDS = ["gaussian", "rademacher", "sparse_sign"]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
# Gaussian entries: the kernels' fp32 log / cospi against torch's fp64 ones, a few fp32 ulps, then the
# dtype's rounding (which may then fall either side): relative bounds per dtype.
GAUSS_RTOL = {torch.float32: 2e-6, torch.float64: 2e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def host(backend):
    return backend in ("cpu", "cuda-emu", "metal-emu")


def test_reference_philox_known_answers():
    vectors = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
               ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
               ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
                (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for ctr, key, want in vectors:
        assert tuple(int(w) for w in ref.philox4x32_10(ctr, key)) == want


def test_gaussian_known_answers(backend):
    """Entries (2, 0..5) of the seed-1234 Gaussian with k = 4, pinned as fp32 bits on every backend: the
    header's ln and cos polynomials (our fits) and Box-Muller's pairs, four entries per draw, bitwise.
    Entries 0 and 4 (a pair's cosine in draws 0 and 1) are the values of the earlier one-draw-per-entry
    rule's columns 0 and 1."""
    S = swisk.ops.sketch_matrix("gaussian", 4, 6, 1234, device=testing.device_of(backend)).cpu()
    want = [0xbf0fbbf4, 0x3e07759f, 0xbecfab4a, 0xbf4c715b, 0x3f125f25, 0xbdfaf31c]
    assert [v & 0xFFFFFFFF for v in S.view(torch.int32)[2].tolist()] == want


def test_gaussian_many_entries_near_fp64():
    """A million Gaussian entries against Box-Muller in fp64: within a few fp32 ulps (the header's ln
    within 0.91 ulp and cos within 1.9 ulp over every value u takes, checked when the fits were made)."""
    S = swisk.ops.sketch_matrix("gaussian", 512, 2048, 77)
    R = ref.sketch_matrix("gaussian", 512, 2048, 77, torch.float64)
    err = (S.double() - R).abs() / R.abs().clamp_min(1e-6)
    assert err.max() < 5e-7, err.max()
    assert abs(S.double().square().mean().item() * 512 - 1) < 0.01  # E S_ij² = 1/k


def assert_same_operator(got, want, kind, dtype):
    if kind == "gaussian":
        torch.testing.assert_close(got.cpu(), want, rtol=GAUSS_RTOL[dtype], atol=1e-7)
    else:
        assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_matrix_matches_reference(backend, rng, kind, dtype):
    if dtype == torch.float64 and backend != "cpu":
        pytest.skip("float64 is CPU-only")
    dev = testing.device_of(backend)
    seed = int(torch.randint(0, 2**56, (), generator=rng))
    got = swisk.ops.sketch_matrix(kind, 19, 203, seed, dtype=dtype, device=dev, nnz=5)
    assert got.shape == (19, 203) and got.dtype == dtype and got.device.type == dev.type
    assert_same_operator(got, ref.sketch_matrix(kind, 19, 203, seed, dtype, nnz=5), kind, dtype)


@pytest.mark.parametrize("kind", KINDS)
def test_every_backend_gives_the_same_operator(kind):
    seed = 2**63 - 12345
    ops = {}
    for b in testing.backend_ids():
        with testing.backend(b):
            ops[b] = swisk.ops.sketch_matrix(kind, 33, 300, seed, device=testing.device_of(b), nnz=7).cpu()
    for b, S in ops.items():  # the Gaussian's ln and cos are the header's own (fma, no vendor math)
        assert torch.equal(S, ops["cpu"]), b
    # fp64 holds the fp32 values exactly
    assert torch.equal(swisk.ops.sketch_matrix(kind, 33, 300, seed, torch.float64, nnz=7), ops["cpu"].double())


@pytest.mark.parametrize("kind", KINDS)
def test_tiles_at_any_offset_are_slices_of_the_operator(backend, kind):
    """A tile of S from any row and column (odd columns start in the middle of a Gaussian pair, past a
    256-column block, a word of Rademacher signs) is bitwise that slice of the whole operator."""
    dev = testing.device_of(backend)
    whole = swisk.ops.sketch_matrix(kind, 9, 700, 31, device=dev, nnz=4).cpu()
    like = torch.empty(0, device=dev)
    for r0, r1, c0, c1 in ((0, 9, 1, 700), (2, 7, 3, 260), (0, 9, 255, 514), (4, 5, 699, 700), (1, 3, 37, 38)):
        tile = torch.ops.swisk.sketch_matrix(like, kind, 9, 700, 31, r0, r1, c0, c1, 4, 0, 0, 0).cpu()
        assert torch.equal(tile, whole[r0:r1, c0:c1]), (r0, r1, c0, c1)


@pytest.mark.parametrize("kind", KINDS)
def test_stacked_terms_are_the_term_seeds_operators(backend, kind):
    """terms >= 1 stacks that many operators' tiles, term t's of seed term_seed(seed, stream0 + t·stream_step)
    (a seeded layer's operators in one call), bitwise, ragged tiles included; stacked_operators is it whole."""
    dev = testing.device_of(backend)
    like = torch.empty(0, device=dev)
    got = torch.ops.swisk.sketch_matrix(like, kind, 9, 300, 31, 2, 7, 5, 290, 4, 3, 1, 2).cpu()
    assert got.shape == (15, 285)
    for t in range(3):
        want = swisk.ops.sketch_matrix(kind, 9, 300, term_seed(31, 1 + 2 * t), nnz=4)[2:7, 5:290]
        assert torch.equal(got[5 * t:5 * t + 5], want), t
    stacked = sketch_ops.stacked_operators("rademacher", 4, 40, 77, 5, 0, 2, torch.float32, dev).cpu()
    assert torch.equal(stacked, torch.stack([swisk.ops.sketch_matrix("rademacher", 4, 40, term_seed(77, 2 * t))
                                             for t in range(5)]))


@pytest.mark.parametrize("bad, message", [((-1, 0, 0), "terms: must be in [0, 2^20]"),
                                          ((2, -1, 0), "stream0: must be in [0, 2^32)"),
                                          ((2, 0, 2 ** 32), "stream_step: must be in [0, 2^32)")])
def test_stacked_terms_bad_arguments(bad, message):
    with pytest.raises(ValueError, match=re.escape(f"[sketch_matrix] {message}")):
        torch.ops.swisk.sketch_matrix(torch.empty(0), "gaussian", 4, 8, 1, 0, 4, 0, 8, 3, *bad)


_HASH = """
import hashlib, swisk, torch
h = hashlib.sha256()
for kind in ("gaussian", "rademacher", "sparse_sign"):
    h.update(swisk.ops.sketch_matrix(kind, 64, 3001, 77, nnz=6).numpy().tobytes())
print(h.hexdigest())
"""


def test_independent_of_the_thread_count():
    digests = set()
    for threads in ("1", "2", "3"):
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", _HASH], env=env, capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_seeds_and_repeats():
    a = swisk.ops.sketch_matrix("rademacher", 16, 64, 5)
    assert torch.equal(a, swisk.ops.sketch_matrix("rademacher", 16, 64, 5))
    for other in (6, 5 + (1 << 32)):  # both key words matter
        frac = (a != swisk.ops.sketch_matrix("rademacher", 16, 64, other)).float().mean().item()
        assert 0.4 < frac < 0.6
    s1 = swisk.ops.sketch_matrix("sparse_sign", 16, 64, 5, nnz=2)
    assert not torch.equal(s1 != 0, swisk.ops.sketch_matrix("sparse_sign", 16, 64, 6, nnz=2) != 0)


def test_sparse_structure_and_count_sketch(backend):
    dev = testing.device_of(backend)
    for k, nnz in ((10, 1), (10, 4), (6, 6), (100, 64)):
        S = swisk.ops.sketch_matrix("sparse_sign", k, 500, 3, device=dev, nnz=nnz).cpu()
        assert ((S != 0).sum(0) == nnz).all()
        assert set(S[S != 0].abs().unique().tolist()) == {ref.scale("sparse_sign", k, nnz)}
        assert 0.4 < (S > 0).sum() / (S != 0).sum() < 0.6


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", KINDS)
def test_sketch_matches_x_times_st(backend, rng, kind, dtype):
    if dtype == torch.float64 and backend != "cpu":
        pytest.skip("float64 is CPU-only")
    dev = testing.device_of(backend)
    x = torch.randn(3, 4, 150, generator=rng, dtype=dtype)
    y = swisk.ops.sketch(x.to(dev), kind, 12, 99, nnz=3)
    S = swisk.ops.sketch_matrix(kind, 12, 150, 99, dtype, dev, nnz=3).cpu()  # the reference's up to GAUSS_RTOL
    assert y.shape == (3, 4, 12)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(y.cpu(), x @ S.T, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_non_contiguous_and_empty(backend, rng, dtype):
    dev = testing.device_of(backend)
    x = torch.randn(40, 6, generator=rng)
    for kind in KINDS:
        S = swisk.ops.sketch_matrix(kind, 5, 40, 17, dtype, dev, nnz=2)
        y = swisk.ops.sketch(x.to(dev, dtype).T, kind, 5, 17, nnz=2)  # non-contiguous (6, 40)
        assert y.dtype == dtype and y.shape == (6, 5)
        want = x.to(dtype).float().T @ S.cpu().float().T  # the reference sees the rounded x
        torch.testing.assert_close(y.cpu().float(), want, rtol=2e-2, atol=3e-2)
        empty = swisk.ops.sketch(torch.zeros(0, 3, 40, dtype=dtype, device=dev), kind, 5, 17, nnz=2)
        assert empty.shape == (0, 3, 5)


def _spy_tiles(monkeypatch):
    shapes, buffers = [], []
    tile = sketch_ops._tile

    def spy(*args):
        out = tile(*args)
        shapes.append(tuple(out.shape))
        buffers.append(out.untyped_storage().data_ptr())
        return out

    monkeypatch.setattr(sketch_ops, "_tile", spy)
    return shapes, buffers


def test_autocast_lowers_every_kind(backend, rng):
    """Under autocast x is cast to the autocast dtype and the result is in it, for every kind, in one
    tile or several (was fp32 for sparse-sign and several tiles): the sketch of x cast by hand."""
    x = torch.randn(4, 64, generator=rng)
    for kind in KINDS:
        want = swisk.ops.sketch(x.bfloat16(), kind, 8, 1, 2)
        for ws in (None, 256):
            with torch.autocast("cpu", dtype=torch.bfloat16), swisk.config.using(**({"workspace_bytes": ws} if ws else {})):
                got = swisk.ops.sketch(x, kind, 8, 1, 2)
            assert got.dtype == torch.bfloat16, (kind, ws)
            torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])  # sparse-sign: its own kernels (below)
def test_column_tiles_are_bounded(monkeypatch, rng, kind):
    """A small workspace: S comes in many column tiles, none past the workspace, each direction's tiles
    in one reused buffer; same result."""
    dtype = torch.float64
    x = torch.randn(5, 1000, generator=rng, dtype=dtype)
    g = torch.randn(5, 8, generator=rng, dtype=dtype)
    want = swisk.ops.sketch(x, kind, 8, 1, nnz=2)
    s = swisk.ops.sketch_matrix(kind, 8, 1000, 1, dtype, nnz=2)
    shapes, buffers = _spy_tiles(monkeypatch)
    with swisk.config.using(workspace_bytes=8 * dtype.itemsize * 64):  # 64 columns of k = 8 values
        got = swisk.ops.sketch(x, kind, 8, 1, nnz=2)
        gx = torch.ops.swisk.sketch_transpose(g, kind, 1000, 1, 2)
    assert len(shapes) == 2 * 16 and max(r * c for r, c in shapes) <= 8 * 64
    assert len(set(buffers[:16])) == 1 and len(set(buffers[16:])) == 1
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gx, g @ s, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_tiles_sum_in_fp32(rng, dtype):
    """fp16/bf16 x with S in many column tiles: the tiles' products are summed in fp32 and rounded once,
    so the error stays that of one GEMM over the whole S (summed in bf16 it grew with the tiles: 5e-2
    at 512 tiles)."""
    n, k = 4096, 256
    x = torch.randn(8, n, generator=rng).to(dtype)
    s = swisk.ops.sketch_matrix("rademacher", k, n, 7, dtype).double()
    want = x.double() @ s.T
    for budget, tiles in ((64 << 20, 1), (k * 2 * 8, 512)):
        with swisk.config.using(workspace_bytes=budget):
            y = swisk.ops.sketch(x, "rademacher", k, 7)
        assert y.dtype == dtype
        err = ((y.double() - want).abs().max() / want.abs().max()).item()
        assert err <= (8e-3 if dtype == torch.bfloat16 else 1e-3), (tiles, err)


def _cuda_takes_tiles(backend, dtype, k, nnz, transpose):
    """CUDA's rule (cpp/src/sketch.cpp, from an H200's run): the GEMM over tiles of S where k / nnz is under
    96 (x S^T) or 32 (g S) in fp32, 768 or 256 in fp16/bf16."""
    if backend not in ("cuda", "cuda-emu"):
        return False
    half = dtype in (torch.float16, torch.bfloat16)
    return k < (256 if half else 32) * nnz if transpose else k < (768 if half else 96) * nnz


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_sparse_sign_kernels_or_tiles(backend, monkeypatch, rng, dtype):
    """Sparse-sign runs swisk's kernels, never a tile of S, on the CPU and Metal, and on CUDA where its rule
    keeps them (else the GEMM over tiles): x S^T and g S equal the formulation's either way. The CPU's (a
    column table, nnz multiply-adds per column): row counts around the vector width (8 fp64 lanes, 16 fp32),
    columns past one 4096-column tile, the same bits at 1 and 2 threads. The GPUs' (S sorted by rows in
    chunks of 2048 / nnz columns; 8 rows of x at a time through tiles of 1024 columns; ranges of chunks
    summed apart when the blocks are few): one and several chunks and tiles, the last partial, rows of S
    with no entries (k > n nnz), a second block of 256 outputs. nnz from 1 (CountSketch) to k."""
    if dtype == torch.float64 and backend != "cpu":
        pytest.skip("float64 is CPU-only")
    dev = testing.device_of(backend)
    shapes, _ = _spy_tiles(monkeypatch)
    threads = torch.get_num_threads()
    tol = {torch.float64: 1e-12, torch.float32: 2e-5, torch.bfloat16: 2e-2}[dtype]
    big = (11, 1500, 33, 8) if backend in ("cuda-emu", "metal-emu") else (17, 4200, 33, 8)  # 6 / 17 GPU chunks
    cases = ((1, 5, 3, 3), (7, 100, 20, 1), big, (33, 300, 64, 64), (2, 3, 40, 3), (3, 700, 300, 2),
             (2, 40, 800, 1))
    kernels = 0
    try:
        for rows, n, k, nnz in cases:
            seed = int(torch.randint(0, 2**62, (), generator=rng))
            S = ref.sketch_matrix("sparse_sign", k, n, seed, torch.float64, "cpu", nnz)
            x, g = torch.randn(rows, n, generator=rng, dtype=torch.float64), torch.randn(rows, k, generator=rng,
                                                                                          dtype=torch.float64)
            got = []
            for t in (1, 2) if backend == "cpu" else (threads,):
                torch.set_num_threads(t)
                shapes.clear()
                y = swisk.ops.sparse_sign_sketch(x.to(dev, dtype), k, nnz, seed).cpu()
                assert bool(shapes) == _cuda_takes_tiles(backend, dtype, k, nnz, False), (k, nnz)
                shapes.clear()
                gx = torch.ops.swisk.sketch_transpose(g.to(dev, dtype), "sparse_sign", n, seed, nnz).cpu()
                assert bool(shapes) == _cuda_takes_tiles(backend, dtype, k, nnz, True), (k, nnz)
                got.append((y, gx))
            kernels += 2 - _cuda_takes_tiles(backend, dtype, k, nnz, False) - _cuda_takes_tiles(backend, dtype, k,
                                                                                                  nnz, True)
            assert all(torch.equal(a, b) for a, b in zip(got[0], got[-1]))
            y, gx = got[0]
            assert y.dtype == dtype and y.shape == (rows, k) and gx.shape == (rows, n)
            torch.testing.assert_close(y.double(), x.to(dtype).double() @ S.T, rtol=tol, atol=tol * 10)
            torch.testing.assert_close(gx.double(), g.to(dtype).double() @ S, rtol=tol, atol=tol * 10)
    finally:
        torch.set_num_threads(threads)
    assert kernels >= 2  # every backend runs its kernels on some case
    shapes.clear()
    x = torch.randn(4, 300, generator=rng, dtype=dtype).to(dev).requires_grad_()
    gy = torch.randn(4, 6, generator=rng, dtype=torch.float64)
    y = swisk.ops.sparse_sign_sketch(x, 6, 3, 8)
    y.backward(gy.to(dev, dtype))  # autograd's backward: the transpose
    S = ref.sketch_matrix("sparse_sign", 6, 300, 8, torch.float64, "cpu", 3)
    torch.testing.assert_close(x.grad.cpu().double(), gy.to(dtype).double() @ S, rtol=tol, atol=tol * 10)
    assert bool(shapes) == _cuda_takes_tiles(backend, dtype, 6, 3, False)
    assert testing.held(y, "sketch") is None


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_nonfinite_values_give_the_products_pattern(backend, rng, dtype):
    """inf and NaN in x (or g) give the NaN/inf pattern of the product x S^T (g S) on every route: the
    sparse-sign kernels add S's non-zeros alone, so rows holding one are computed again through tiles of
    S (a NaN wherever a zero of S meets an inf); the rows without keep the kernels' bits. Rows of S with
    no entries (k > n nnz) included; the dense kinds, SRHT and the FWHT by their own routes."""
    if dtype == torch.float64 and backend != "cpu":
        pytest.skip("float64 is CPU-only")
    dev, inf, nan = testing.device_of(backend), float("inf"), float("nan")

    def same_pattern(got, want):
        got = got.cpu().double()
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
        assert torch.equal(got[got.isinf()], want[want.isinf()])

    for kind, rows, n, k, nnz in (("sparse_sign", 6, 300, 64, 4), ("sparse_sign", 5, 40, 900, 1),
                                  ("sparse_sign", 4, 50, 20, 20), ("gaussian", 4, 40, 16, 8), ("rademacher", 4, 40, 16, 8)):
        seed = int(torch.randint(0, 2**62, (), generator=rng))
        S = ref.sketch_matrix(kind, k, n, seed, torch.float64, "cpu", nnz)
        x = torch.randn(rows, n, generator=rng, dtype=torch.float64).to(dtype)
        g = torch.randn(rows, k, generator=rng, dtype=torch.float64).to(dtype)
        clean_y = swisk.ops.sketch(x.to(dev), kind, k, seed, nnz).cpu()
        clean_gx = torch.ops.swisk.sketch_transpose(g.to(dev), kind, n, seed, nnz).cpu()
        x[1, 3], x[2, 7], x[2, 9], x[3, 0] = inf, -inf, inf, nan
        g[1, 2], g[3, 0], g[3, k - 1] = -inf, nan, inf
        y = swisk.ops.sketch(x.to(dev), kind, k, seed, nnz).cpu()
        gx = torch.ops.swisk.sketch_transpose(g.to(dev), kind, n, seed, nnz).cpu()
        same_pattern(y, x.double() @ S.T)
        same_pattern(gx, g.double() @ S)
        assert gx[3].isnan().all() and (y[1].isnan().any() or kind != "sparse_sign" or nnz == k)
        for got, clean, bad in ((y, clean_y, (1, 2, 3)), (gx, clean_gx, (1, 3))):
            keep = [r for r in range(rows) if r not in bad]
            assert torch.equal(got[keep], clean[keep])
    x = torch.randn(3, 64, generator=rng, dtype=torch.float64).to(dtype)
    x[1, 5], x[2, 1], x[2, 2] = inf, inf, -inf
    same_pattern(swisk.ops.srht(x.to(dev), 16, 1), ref.srht(x.double(), 16, 1))
    same_pattern(swisk.ops.fwht(x.to(dev)), ref.fwht(x.double(), 1.0))


def test_capture_takes_the_tiles_without_reading_back(backend, rng, monkeypatch):
    """Under CUDA graph capture (torch.cuda.graphs, compile's cudagraphs) a read-back is forbidden: the
    sparse-sign calls then take the tiles' GEMM, which gives the product's NaN/inf pattern by itself, and
    never reach the non-finite check. Here capture is reported as on (monkeypatched), and the check is
    replaced by one that fails the test if it runs."""
    from swisk._ops import run
    dev, inf = testing.device_of(backend), float("inf")
    S = ref.sketch_matrix("sparse_sign", 64, 300, 11, torch.float64, "cpu", 4)
    x = torch.randn(5, 300, generator=rng, dtype=torch.float64).float()
    g = torch.randn(5, 64, generator=rng, dtype=torch.float64).float()
    x[1, 3], x[2, 7], g[3, 5] = inf, -inf, inf

    def no_read_back(*_):
        raise AssertionError("the non-finite check ran under capture")
    monkeypatch.setattr(run, "_capturing", lambda t: True)
    monkeypatch.setattr(sketch_ops, "_nonfinite_rows", no_read_back)
    y = swisk.ops.sketch(x.to(dev), "sparse_sign", 64, 11, 4).cpu().double()
    gx = torch.ops.swisk.sketch_transpose(g.to(dev), "sparse_sign", 300, 11, 4).cpu().double()
    for got, want in ((y, x.double() @ S.T), (gx, g.double() @ S)):
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
        fin = want.isfinite()
        torch.testing.assert_close(got[fin], want[fin], rtol=1e-5, atol=1e-5)


def test_sparse_sign_tables_follow_the_operator(rng):
    """The CPU keeps the column tables of the last operators: calls alternating between operators that
    differ in one of (seed's low word, seed's high word, k, n, nnz) each apply their own S, and a
    repeated call gives the same bits."""
    base = (5, 40, 300, 3)  # seed, k, n, nnz
    variants = [base, (6, 40, 300, 3), (5 + 2**40, 40, 300, 3), (5, 41, 300, 3), (5, 40, 301, 3), (5, 40, 300, 4)]
    for seed, k, n, nnz in variants * 2:
        S = ref.sketch_matrix("sparse_sign", k, n, seed, torch.float64, "cpu", nnz)
        x = torch.randn(3, n, generator=rng, dtype=torch.float64)
        g = torch.randn(3, k, generator=rng, dtype=torch.float64)
        y = swisk.ops.sparse_sign_sketch(x, k, nnz, seed)
        gx = torch.ops.swisk.sketch_transpose(g, "sparse_sign", n, seed, nnz)
        torch.testing.assert_close(y, x @ S.T, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(gx, g @ S, rtol=1e-12, atol=1e-12)
        assert torch.equal(swisk.ops.sparse_sign_sketch(x, k, nnz, seed), y)


def test_sparse_sign_past_the_table_bound_takes_tiles(monkeypatch, rng):
    """Past the column table's bound (n * nnz > 2^23), and on the GPUs past rows of S of 4096 entries
    (n * nnz / k; cuda-emu here): tiles of S and torch's GEMM, the same operator, both directions."""
    shapes, _ = _spy_tiles(monkeypatch)
    x = torch.randn(2, (1 << 20) + 1, generator=rng)
    y = swisk.ops.sparse_sign_sketch(x, 16, 8, 5)
    assert shapes  # the tile route ran
    torch.testing.assert_close(y, x @ swisk.ops.sketch_matrix("sparse_sign", 16, x.shape[1], 5, nnz=8).T)
    shapes.clear()
    x, g = torch.randn(3, 8193, generator=rng), torch.randn(3, 2, generator=rng)  # 8193 / 2 entries per row
    S = ref.sketch_matrix("sparse_sign", 2, 8193, 9, torch.float32, "cpu", 1)
    with testing.backend("cuda-emu"):
        y = swisk.ops.sparse_sign_sketch(x, 2, 1, 9)
        gx = torch.ops.swisk.sketch_transpose(g, "sparse_sign", 8193, 9, 1)
    assert len(shapes) == 2
    torch.testing.assert_close(y, x @ S.T, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(gx, g @ S, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_johnson_lindenstrauss(kind):
    """E ||S x||^2 = ||x||^2: the mean ratio over 300 seeds within 10%."""
    x = torch.randn(64, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ratios = [swisk.ops.sketch(x, kind, 16, seed, nnz=4).square().sum() / x.square().sum() for seed in range(300)]
    mean = torch.stack(ratios).mean().item()
    assert abs(mean - 1) < 0.1, mean


def test_named_forms(rng):
    x = torch.randn(7, 40, generator=rng)
    assert torch.equal(swisk.ops.gaussian_sketch(x, 6, 3), swisk.ops.sketch(x, "gaussian", 6, 3))
    assert torch.equal(swisk.ops.rademacher_sketch(x, 6, 3), swisk.ops.sketch(x, "rademacher", 6, 3))
    assert torch.equal(swisk.ops.sparse_sign_sketch(x, 6, 2, 3), swisk.ops.sketch(x, "sparse_sign", 6, 3, nnz=2))
    assert not torch.equal(swisk.ops.sparse_sign_sketch(x, 6, 1, 3), swisk.ops.sparse_sign_sketch(x, 6, 2, 3))


@pytest.mark.parametrize("kind", KINDS)
def test_gradcheck_fp64(rng, kind):
    x = torch.randn(3, 20, generator=rng, dtype=torch.float64, requires_grad=True)
    f = lambda x: swisk.ops.sketch(x, kind, 5, 11, nnz=2)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))
    g = torch.randn(3, 5, generator=rng, dtype=torch.float64, requires_grad=True)
    t = lambda g: torch.ops.swisk.sketch_transpose(g, kind, 20, 11, 2)  # noqa: E731
    assert torch.autograd.gradcheck(t, (g,))
    assert torch.autograd.gradgradcheck(t, (g,))


@pytest.mark.parametrize("kind", KINDS)
def test_backward_is_the_exact_transpose(backend, rng, kind):
    dev = testing.device_of(backend)
    x = torch.randn(4, 30, generator=rng).to(dev).requires_grad_()
    gy = torch.randn(4, 6, generator=rng)
    swisk.ops.sketch(x, kind, 6, 8, nnz=3).backward(gy.to(dev))
    S = swisk.ops.sketch_matrix(kind, 6, 30, 8, nnz=3)
    torch.testing.assert_close(x.grad.cpu(), gy @ S, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["gaussian", "rademacher"])  # sparse-sign on the CPU: no tiles (above)
def test_backward_reuses_the_forwards_single_tile(monkeypatch, rng, kind):
    """One tile: the backward multiplies by the forward's S (no second generation) and takes it off x;
    in several tiles it regenerates them. Either way the exact transpose, in fp64 to 1e-12; a held S
    of another seed or size is not used."""
    calls = []
    tile = sketch_ops._tile
    monkeypatch.setattr(sketch_ops, "_tile", lambda *a: calls.append(a[4:]) or tile(*a))
    S = swisk.ops.sketch_matrix(kind, 6, 300, 8, torch.float64, nnz=3)
    gy = torch.randn(4, 6, generator=rng, dtype=torch.float64)
    for budget, tiles in ((1 << 26, 1), (6 * 8 * 64, 5)):  # the default bound; 64 columns of k = 6
        x = torch.randn(4, 300, generator=rng, dtype=torch.float64, requires_grad=True)
        calls.clear()
        with swisk.config.using(workspace_bytes=budget):
            y = swisk.ops.sketch(x, kind, 6, 8, nnz=3)
            assert len(calls) == tiles
            y.backward(gy)
        assert len(calls) == (1 if tiles == 1 else 2 * tiles)
        assert testing.held(y, "sketch") is None
        torch.testing.assert_close(x.grad, gy @ S, rtol=1e-12, atol=1e-12)
    x = torch.randn(4, 300, generator=rng, dtype=torch.float64, requires_grad=True)
    stored = []  # what each hold() stored under (None: nothing held)
    hold = sketch_ops.hold
    monkeypatch.setattr(sketch_ops, "hold", lambda *a: stored.append(hold(*a)) or stored[-1])
    with torch.no_grad():
        swisk.ops.sketch(x, kind, 6, 8, nnz=3)
    assert not stored  # nothing held without a backward to come
    y = swisk.ops.sketch(x, kind, 6, 8, nnz=3)
    assert len(stored) == 1 and stored[0] is y.grad_fn.token
    held = y.grad_fn.token.held  # what the forward holds: one S, ("sketch", id(x)) -> (key, S)
    assert list(held) == [("sketch", id(x))]
    key = list(held["sketch", id(x)][0])
    key[3] = 9  # (kind, k, n, seed, ...): an S of seed 9 held instead
    held["sketch", id(x)] = (tuple(key), torch.zeros(6, 300, dtype=torch.float64))
    y.backward(gy)
    torch.testing.assert_close(x.grad, gy @ S, rtol=1e-12, atol=1e-12)


def test_forward_mode_and_vmap(rng):
    x = torch.randn(4, 30, generator=rng, dtype=torch.float64)
    t = torch.randn(4, 30, generator=rng, dtype=torch.float64)
    f = lambda x: swisk.ops.sketch(x, "gaussian", 6, 2)  # noqa: E731
    y, jt = torch.func.jvp(f, (x,), (t,))
    torch.testing.assert_close(y, f(x))
    torch.testing.assert_close(jt, f(t))
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        out = f(fwAD.make_dual(x, t))
        torch.testing.assert_close(fwAD.unpack_dual(out).tangent, f(t))
    torch.testing.assert_close(torch.func.jacrev(f)(x[0]), swisk.ops.sketch_matrix("gaussian", 6, 30, 2, torch.float64))
    torch.testing.assert_close(torch.func.vmap(f)(x.view(2, 2, 30)), f(x).view(2, 2, 6))
    hvp = torch.func.jacfwd(torch.func.grad(lambda v: f(v).square().sum()))(x[0])
    S = swisk.ops.sketch_matrix("gaussian", 6, 30, 2, torch.float64)
    torch.testing.assert_close(hvp, 2 * S.T @ S)


def test_opcheck(rng):
    x = torch.randn(5, 24, generator=rng, requires_grad=True)
    for kind in KINDS:
        torch.library.opcheck(torch.ops.swisk.sketch.default, (x, kind, 6, 4, 3))
        torch.library.opcheck(torch.ops.swisk.sketch_transpose.default, (torch.randn(5, 6, generator=rng), kind, 24, 4, 3))
        torch.library.opcheck(torch.ops.swisk.sketch_matrix.default,
                              (torch.empty(0), kind, 6, 24, 4, 1, 5, 3, 20, 3, 0, 0, 0))
        torch.library.opcheck(torch.ops.swisk.sketch_matrix.default,
                              (torch.empty(0), kind, 6, 24, 4, 1, 5, 3, 20, 3, 4, 1, 2))


def test_compile_fullgraph(rng):
    x = torch.randn(8, 32, generator=rng, requires_grad=True)

    @torch.compile(fullgraph=True)
    def f(x):
        return swisk.ops.sketch(torch.tanh(x), "rademacher", 4, 123).square().sum()

    y = f(x)
    S = swisk.ops.sketch_matrix("rademacher", 4, 32, 123)
    torch.testing.assert_close(y, (torch.tanh(x) @ S.T).square().sum())
    y.backward()
    xr = x.detach().requires_grad_()
    (torch.tanh(xr) @ S.T).square().sum().backward()
    torch.testing.assert_close(x.grad, xr.grad)


def bad(exc, match, fn, *args, **kw):
    with pytest.raises(exc, match=match):
        fn(*args, **kw)


def test_bad_inputs(backend):
    if not host(backend):
        pytest.skip("host backends")
    x = torch.randn(3, 10)
    sk, sm = swisk.ops.sketch, swisk.ops.sketch_matrix
    bad(ValueError, r"\[sketch\] kind: unknown sketch 'haar'", sk, x, "haar", 4, 1)
    bad(TypeError, r"\[sketch\] kind: expected a str", sk, x, 3, 4, 1)
    bad(ValueError, r"\[sketch\] k: must be in \[1", sk, x, "gaussian", 0, 1)
    bad(ValueError, r"\[sketch\] k: must be in \[1, 2\^31\), got 1180591620717411303424", sk, x, "gaussian", 2**70, 1)
    bad(ValueError, r"\[sketch_matrix\] n: must be in \[1", sm, "gaussian", 4, 1 << 31, 1)
    bad(TypeError, r"\[sketch\] k: expected an int", sk, x, "gaussian", 2.0, 1)
    bad(ValueError, r"\[sketch\] seed: must be a non-negative int below 2\^63", sk, x, "gaussian", 4, -1)
    bad(ValueError, r"\[sketch\] seed: must be a non-negative", sk, x, "gaussian", 4, 1 << 63)
    bad(TypeError, r"\[sketch\] seed: expected an int", sk, x, "gaussian", 4, 1.5)
    bad(ValueError, r"\[sketch\] nnz: must be in \[1, min\(k", sk, x, "sparse_sign", 4, 1, nnz=5)
    bad(ValueError, r"\[sketch\] nnz:", sk, x, "sparse_sign", 4, 1, nnz=0)
    # the named forms' errors carry their own names
    bad(ValueError, r"\[sparse_sign_sketch\] nnz: must be in \[1, min\(k", swisk.ops.sparse_sign_sketch, x, 4, 5, 1)
    bad(ValueError, r"\[gaussian_sketch\] k: must be in \[1", swisk.ops.gaussian_sketch, x, 0, 1)
    bad(TypeError, r"\[rademacher_sketch\] x: expected a floating-point tensor", swisk.ops.rademacher_sketch,
        torch.ones(3, 10, dtype=torch.int64), 4, 1)
    bad(TypeError, r"\[sketch\] x: expected a floating-point tensor", sk, torch.ones(3, 10, dtype=torch.int64),
        "gaussian", 4, 1)
    bad(TypeError, r"\[sketch\] x: expected a torch.Tensor", sk, [1.0], "gaussian", 4, 1)
    bad(ValueError, r"\[sketch\] x: must be \(\.\.\., n\)", sk, torch.tensor(1.0), "gaussian", 4, 1)
    bad(ValueError, r"\[sketch_matrix\] n: must be in \[1", sm, "gaussian", 4, 0, 1)
    bad(ValueError, r"\[sketch_matrix\] seed:", sm, "gaussian", 4, 5, 2**64)
    bad(TypeError, r"\[sketch_matrix\] dtype: expected a torch.dtype", sm, "gaussian", 4, 5, 1, dtype="float")
    bad(TypeError, r"\[sketch_matrix\] dtype: expected a floating-point dtype .*, got torch.int32", sm, "gaussian",
        4, 5, 1, dtype=torch.int32)
    bad(TypeError, r"\[sketch_matrix\] device: expected a torch.device, str or int, got float", sm, "gaussian", 4, 5,
        1, device=1.5)
    bad(ValueError, r"\[sketch_matrix\] device: 'nowhere' is not a device this torch can use: ", sm, "gaussian", 4,
        5, 1, device="nowhere")
    for dev, present in (("cuda", torch.cuda.is_available()), ("mps", torch.backends.mps.is_available())):
        if not present:  # torch's reason, in the op's error
            bad(ValueError, rf"\[sketch_matrix\] device: '{dev}' is not a device this torch can use: ", sm,
                "gaussian", 4, 5, 1, device=dev)
    if backend != "cpu":
        bad(TypeError, "float64 is not supported on the GPU", sm, "gaussian", 4, 5, 1, dtype=torch.float64)
        bad(TypeError, "float64 is not supported on the GPU", sk, x.double(), "gaussian", 4, 1)
