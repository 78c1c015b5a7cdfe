"""swisk.ops.kan_linear against swisk.reference.kan_linear on every backend."""
import os
import subprocess
import sys

import pytest
import torch

import swisk
from swisk import reference, testing

# Relative error bounds (max |op - reference| / max |reference|) per dtype.
REL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def random_grid(features, n_knots, rng, dtype=torch.float64):
    """Strictly increasing, non-uniform knots per feature (as after a grid update)."""
    steps = torch.rand(features, n_knots, generator=rng, dtype=torch.float64) + 0.05
    return (torch.cumsum(steps, -1) - steps.sum(-1, keepdim=True) / 2).to(dtype)


def make(rng, rows, fin, fout, grid_size, order, dtype=torch.float64, base=True, scaler=True):
    """Fresh inputs; x covers the inside, the outside and exactly the first, an inner and the last knot."""
    grid = random_grid(fin, grid_size + 2 * order + 1, rng)
    span = grid[:, -1] - grid[:, 0]
    x = (torch.rand(rows, fin, generator=rng, dtype=torch.float64) * 1.3 - 0.65) * span + grid.mean(-1)
    if rows >= 3:
        x[0], x[1], x[2] = grid[:, 0], grid[:, order + 1], grid[:, -1]
    r = lambda *s: torch.randn(*s, generator=rng, dtype=torch.float64)  # noqa: E731
    bw = r(fout, fin) if base else None
    sw = r(fout, fin, grid_size + order)
    sc = r(fout, fin) if scaler else None
    return [None if t is None else t.to(dtype) for t in (x, grid, bw, sw, sc)]


def ref(x, grid, bw, sw, sc, order):
    """The reference in fp64 (a missing base branch is a zero base weight)."""
    d = lambda t: None if t is None else t.double()  # noqa: E731
    bw = torch.zeros(sw.shape[:2], dtype=torch.float64) if bw is None else bw
    return reference.kan_linear(d(x), d(grid), d(bw), d(sw), d(sc), order)


def rel_err(got, want):
    return ((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


@pytest.mark.parametrize("order", [1, 3])
@pytest.mark.parametrize("base,scaler", [(True, True), (False, True), (True, False)])
def test_matches_reference(backend, rng, route, order, base, scaler):
    dev = testing.device_of(backend)
    for dtype in testing.dtypes_of(backend):
        args = make(rng, 37, 19, 21, 5, order, dtype, base, scaler)  # tails of every 16-wide tile
        want = ref(*args, order)
        got = swisk.ops.kan_linear(*[None if t is None else t.to(dev) for t in args], order).cpu()
        assert got.shape == (37, 21) and got.dtype == dtype
        err = rel_err(got, want)
        assert err <= REL[dtype], f"{backend} {dtype}: rel error {err:.3g} (seed {rng.initial_seed()})"


def test_leading_dims_and_non_contiguous(backend, rng, route):
    x, grid, bw, sw, sc = make(rng, 24, 5, 6, 4, 3, torch.float32)
    x3 = x.reshape(4, 6, 5).transpose(0, 1)  # (6, 4, 5), non-contiguous
    sw_nc = sw.transpose(0, 1).contiguous().transpose(0, 1)
    assert not x3.is_contiguous() and not sw_nc.is_contiguous()
    got = swisk.ops.kan_linear(x3, grid, bw, sw_nc, sc, 3)
    assert got.shape == (6, 4, 6)
    assert rel_err(got, ref(x3, grid, bw, sw, sc, 3)) <= 2e-5
    single = swisk.ops.kan_linear(x[0], grid, bw, sw, sc, 3)  # (in,) -> (out,)
    assert rel_err(single, ref(x[0], grid, bw, sw, sc, 3)) <= 2e-5


@pytest.mark.parametrize("base,scaler", [(True, True), (False, False)])
def test_backward_matches_reference(backend, rng, route, base, scaler):
    for dtype in [torch.float64, torch.float32] if backend == "cpu" else [torch.float32]:
        args = make(rng, 33, 17, 18, 6, 3, dtype, base, scaler)
        leaves = [None if t is None or i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
        inputs = [a if leaf is None else leaf for a, leaf in zip(args, leaves)]
        y = swisk.ops.kan_linear(*inputs, 3)
        go = torch.randn(y.shape, generator=rng, dtype=torch.float64)
        want_leaves = [None if t is None else t.detach().double().requires_grad_() for t in leaves]
        yr = reference.kan_linear(want_leaves[0], args[1].double(),
                                  want_leaves[2] if base else torch.zeros(18, 17, dtype=torch.float64),
                                  want_leaves[3], want_leaves[4], 3)
        live = [i for i, t in enumerate(leaves) if t is not None]
        got = torch.autograd.grad(y, [leaves[i] for i in live], go.to(dtype))
        want = torch.autograd.grad(yr, [want_leaves[i] for i in live], go)
        tol = 1e-12 if dtype == torch.float64 else 5e-5
        for i, g, w in zip(live, got, want):
            assert g.dtype == dtype
            assert rel_err(g, w) <= tol, f"{backend} {dtype} grad {i}: {rel_err(g, w):.3g} (seed {rng.initial_seed()})"


@pytest.mark.parametrize("need_x,need_weights", [(False, True), (True, False)])
def test_backward_computes_only_what_is_needed(backend, rng, route, need_x, need_weights):
    """A first layer (x needs no gradient) or frozen weights: the op's gradients that are asked for match
    the reference, the others come back empty; through autograd, the same gradients."""
    dev = testing.device_of(backend)
    for dtype in [torch.float64, torch.float32] if backend == "cpu" else [torch.float32]:
        x, grid, bw, sw, sc = [t.to(dev) for t in make(rng, 33, 17, 18, 6, 3, dtype)]
        go = torch.randn(33, 18, generator=rng, dtype=dtype).to(dev)
        got = torch.ops.swisk.kan_linear_backward(x, grid, bw, sw, sc, go, 3, need_x, need_weights)
        leaves = [t.detach().cpu().double().requires_grad_() for t in (x, bw, sw, sc)]
        yr = reference.kan_linear(leaves[0], grid.cpu().double(), *leaves[1:], 3)
        want = torch.autograd.grad(yr, leaves, go.cpu().double())
        tol = 1e-12 if dtype == torch.float64 else 5e-5
        for k, (g, w, n) in enumerate(zip(got, want, (need_x, need_weights, need_weights, need_weights))):
            if not n:
                assert g.numel() == 0, f"grad {k} computed though not needed"
                continue
            assert g.shape == w.shape and rel_err(g.cpu(), w) <= tol, f"{backend} {dtype} grad {k}"
        moving = [x.requires_grad_(need_x)] + [t.requires_grad_(need_weights) for t in (bw, sw, sc)]
        y = swisk.ops.kan_linear(moving[0], grid, *moving[1:], 3)
        live = [k for k, t in enumerate(moving) if t.requires_grad]
        grads = torch.autograd.grad(y, [moving[k] for k in live], go)
        for k, g in zip(live, grads):
            assert rel_err(g.cpu(), want[k]) <= tol, f"{backend} {dtype} autograd grad {k}"


def test_backward_half_precision(backend, rng, route):
    for dtype in (torch.float16, torch.bfloat16):
        args = make(rng, 20, 9, 10, 5, 3, dtype)
        leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
        y = swisk.ops.kan_linear(*leaves, 3)
        grads = torch.autograd.grad(y.float().square().sum(), [leaves[i] for i in (0, 2, 3, 4)])
        dl = [t.detach().double().requires_grad_() for t in leaves]
        yr = reference.kan_linear(*dl, 3)
        want = torch.autograd.grad(yr.square().sum(), [dl[i] for i in (0, 2, 3, 4)])
        for g, w in zip(grads, want):
            assert rel_err(g, w) <= 10 * REL[dtype], f"{backend} {dtype}: {rel_err(g, w):.3g}"


def test_deterministic(backend, rng, route):
    args = make(rng, 40, 7, 9, 5, 3, torch.float32)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    go = torch.randn(40, 9, generator=rng)
    runs = [torch.autograd.grad(swisk.ops.kan_linear(*leaves, 3), [leaves[i] for i in (0, 2, 3, 4)], go)
            for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(*runs))


@pytest.mark.parametrize("order", [1, 3])
def test_gradcheck_fp64(rng, route, order):
    x, grid, bw, sw, sc = make(rng, 6, 3, 4, 4, order)
    x = testing.away_from_knots(x[3:], grid).requires_grad_()  # the bases are only piecewise smooth
    ws = [t.requires_grad_() for t in (bw, sw, sc)]
    assert torch.autograd.gradcheck(lambda x, b, s, c: swisk.ops.kan_linear(x, grid, b, s, c, order), (x, *ws))
    assert torch.autograd.gradcheck(lambda x, s: swisk.ops.kan_linear(x, grid, None, s, None, order), (x, ws[1]))


def test_second_derivatives_of_a_partial_backward(rng, route):
    """gradgradcheck with x constant (only the weights move) and with frozen weights (only x moves): the
    backward computed for part of the inputs is differentiable again."""
    x, grid, bw, sw, sc = make(rng, 7, 3, 4, 4, 3)
    x = testing.away_from_knots(x[3:], grid)
    assert torch.autograd.gradgradcheck(lambda b, s, c: swisk.ops.kan_linear(x, grid, b, s, c, 3),
                                        [t.clone().requires_grad_() for t in (bw, sw, sc)])
    assert torch.autograd.gradgradcheck(lambda x: swisk.ops.kan_linear(x, grid, bw, sw, sc, 3),
                                        [x.clone().requires_grad_()])


def test_opcheck(rng, route):
    x, grid, bw, sw, sc = make(rng, 5, 4, 3, 5, 3, torch.float32)
    x.requires_grad_()
    bw.requires_grad_()
    torch.library.opcheck(torch.ops.swisk.kan_linear.default, (x, grid, bw, sw, sc, 3))
    torch.library.opcheck(torch.ops.swisk.kan_linear.default, (x, grid, None, sw, None, 3))
    go = torch.randn(5, 3, generator=rng)
    for need in ((True, True), (False, True), (True, False)):
        torch.library.opcheck(torch.ops.swisk.kan_linear_backward.default,
                              (x.detach(), grid, bw.detach(), sw, sc, go, 3, *need))


def test_compile_fullgraph(rng, route):
    x, grid, bw, sw, sc = make(rng, 8, 4, 5, 5, 3, torch.float32)

    # An exact op before kan_linear: torch 2.6's compiled tanh is 2 ulp off eager's, which this loss's
    # curvature turns into 2e-5 in x's gradient.
    @torch.compile(fullgraph=True)
    def f(x, bw):
        return swisk.ops.kan_linear(x * 0.5, grid, bw, sw, sc, 3).square().sum()

    xr = x.clone().requires_grad_()
    loss = f(xr, bw)
    loss.backward()
    xe = x.clone().requires_grad_()
    want = swisk.ops.kan_linear(xe * 0.5, grid, bw, sw, sc, 3).square().sum()
    want.backward()
    torch.testing.assert_close(loss, want)
    torch.testing.assert_close(xr.grad, xe.grad)
    br, be = bw.clone().requires_grad_(), bw.clone().requires_grad_()  # a first layer: no grad_x
    f(x, br).backward()
    swisk.ops.kan_linear(x * 0.5, grid, be, sw, sc, 3).square().sum().backward()
    torch.testing.assert_close(br.grad, be.grad)


def test_autocast_cpu_bf16(rng, route):
    x, grid, bw, sw, sc = make(rng, 16, 6, 7, 5, 3, torch.float32)
    leaves = [t.clone().requires_grad_() for t in (x, bw, sw, sc)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = swisk.ops.kan_linear(leaves[0], grid, *leaves[1:], 3)
    assert y.dtype == torch.bfloat16
    cast = [t.to(torch.bfloat16) for t in (x, grid, bw, sw, sc)]
    assert rel_err(y, ref(*cast, 3)) <= REL[torch.bfloat16]
    y.float().sum().backward()
    assert all(t.grad is not None and t.grad.dtype == torch.float32 for t in leaves)


def bad(exc, match, *args):
    with pytest.raises(exc, match=match):
        swisk.ops.kan_linear(*args)


def test_bad_inputs(rng):
    x, grid, bw, sw, sc = make(rng, 3, 4, 5, 5, 3, torch.float32)
    op = r"\[kan_linear\] "
    bad(ValueError, op + r"grid: must be \(in, n_knots\) with in = x.shape\[-1\] = 4", x, grid[:3], bw, sw, sc, 3)
    bad(ValueError, op + r"grid: must be \(in, n_knots\), got shape", x, grid[0], bw, sw, sc, 3)
    bad(ValueError, op + r"spline_weight: must be \(out, in, n_basis\) with in = 4 and n_basis = n_knots - 1 - "
        r"spline_order = 8", x, grid, bw, sw[:, :, :7], sc, 3)
    bad(ValueError, op + r"spline_weight: must be \(out, in, n_basis\) with in = 4", x, grid, bw, sw[:, :3], sc, 3)
    bad(ValueError, op + r"spline_weight: must be \(out, in, n_basis\), got shape", x, grid, bw, sw[0], sc, 3)
    bad(ValueError, op + r"base_weight: must be \(out, in\) = \(5, 4\)", x, grid, bw[:4], sw, sc, 3)
    bad(ValueError, op + r"base_weight: must be \(out, in\) = \(5, 4\)", x, grid, bw.T.contiguous(), sw, sc, 3)
    bad(ValueError, op + r"spline_scaler: must be \(out, in\) = \(5, 4\)", x, grid, bw, sw, sc[:, :3], 3)
    bad(ValueError, op + r"spline_weight: .* n_basis = n_knots - 1 - spline_order = 9", x, grid, bw, sw, sc, 2)
    bad(ValueError, op + r"spline_order: must be >= 0", x, grid, bw, sw, sc, -1)
    bad(ValueError, op + r"spline_order: at most 63 is supported on cpu", x, grid, bw, sw, sc, 64)
    bad(ValueError, op + r"spline_order: out of range, got 1099511627776", x, grid, bw, sw, sc, 2**40)
    bad(ValueError, op + r"spline_order: out of range, got -1099511627776", x[:0], grid, bw, sw, sc, -2**40)  # the route asks first
    bad(ValueError, op + r"spline_order: 3 needs at least 5 knots", x, grid[:, :4], bw, sw, sc, 3)
    bad(ValueError, op + r"x: must be \(\.\.\., in\)", x[0, 0], grid, bw, sw, sc, 3)
    bad(TypeError, op + r"x: expected a floating-point tensor, got int64", x.long(), grid, bw, sw, sc, 3)
    bad(TypeError, op + r"grid: dtype float64 differs from x's float32", x, grid.double(), bw, sw, sc, 3)
    bad(TypeError, op + r"base_weight: dtype float16 differs from x's float32", x, grid, bw.half(), sw, sc, 3)
    bad(TypeError, op + r"spline_weight: dtype float64 differs", x, grid, bw, sw.double(), sc, 3)
    bad(TypeError, op + r"spline_scaler: dtype bfloat16 differs", x, grid, bw, sw, sc.bfloat16(), 3)
    bad(TypeError, op + r"spline_order: expected an int", x, grid, bw, sw, sc, 3.0)
    bad(TypeError, op + r"spline_weight: expected a torch.Tensor", x, grid, bw, None, sc, 3)
    flat = grid.clone()
    flat[1, 6] = flat[1, 5]
    bad(ValueError, op + r"grid: knots must be strictly increasing; row 1 is not at index 6", x, flat, bw, sw, sc, 3)
    down = grid.flip(-1).contiguous()
    bad(ValueError, op + r"grid: knots must be strictly increasing; row 0 is not at index 1", x, down, bw, sw, sc, 3)
    for b in ("cuda-emu", "metal-emu"):
        with testing.backend(b):
            d = [t.double() for t in (x, grid, bw, sw, sc)]
            bad(TypeError, r"\[kan_linear\] x: float64 is not supported", *d, 3)
            with swisk.config.using(kan_route="gemm"):
                bad(TypeError, r"\[kan_linear\] x: float64 is not supported", *d, 3)


@pytest.mark.parametrize("grid_size,order", [(5, 3), (16, 2)])
def test_tensor_core_path_emulated(rng, grid_size, order):
    """cuda-emu runs the CUDA tensor-core forward for fp16/bf16 (WMMA replaced by its scalar twin):
    several row and output tiles, tails in both, packed columns spanning main-loop steps."""
    from swisk import _C
    from swisk._backend import dtype_code

    for dtype in (torch.float16, torch.bfloat16):
        assert _C.kan_linear_workspace(7, 70, grid_size + order, order, dtype_code(dtype), "cuda-emu", False, False) > 0
        args = make(rng, 133, 7, 70, grid_size, order, dtype)
        with testing.backend("cuda-emu"):
            got = swisk.ops.kan_linear(*args, order)
        err = rel_err(got, ref(*args, order))
        assert err <= REL[dtype], f"{dtype}: rel error {err:.3g} (seed {rng.initial_seed()})"


def test_tf32_path_emulated(rng):
    """With torch.backends.cuda.matmul.allow_tf32 set, fp32 takes the tensor-core forward as tf32
    (operands rounded to 10 mantissa bits): tf32-level error, and visibly not the fp32 kernel."""
    from swisk import _C
    from swisk._backend import dtype_code

    args = make(rng, 97, 6, 70, 5, 3, torch.float32)
    want = ref(*args, 3)
    with testing.backend("cuda-emu"), swisk.config.using(kan_route="fused"):
        fp32 = swisk.ops.kan_linear(*args, 3)
        with testing.torch_flag(torch.backends.cuda.matmul, "allow_tf32", True):
            assert _C.kan_linear_workspace(6, 70, 8, 3, dtype_code(torch.float32), "cuda-emu", False, True) > 0
            tf32 = swisk.ops.kan_linear(*args, 3)
    assert rel_err(fp32, want) <= REL[torch.float32]
    err = rel_err(tf32, want)
    assert REL[torch.float32] < err <= 3e-3, f"tf32 rel error {err:.3g} (seed {rng.initial_seed()})"


@pytest.mark.parametrize("order", [0, 2, 5, 7, 8, 10])
def test_every_order_cpu(rng, route, order):
    """Each compile-time order of the CPU kernels, forward and gradients, in fp64; past the fused kernels'
    order 7 both settings take the GEMM route."""
    args = make(rng, 19, 3, 4, 6, order)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = swisk.ops.kan_linear(*leaves, order)
    want = ref(*args, order)
    assert rel_err(y, want) <= 1e-12
    go = torch.randn(y.shape, generator=rng, dtype=torch.float64)
    got = torch.autograd.grad(y, [leaves[i] for i in (0, 2, 3, 4)], go)
    dl = [t.detach().requires_grad_() for t in args]
    w = torch.autograd.grad(reference.kan_linear(*dl, order), [dl[i] for i in (0, 2, 3, 4)], go)
    for g, e in zip(got, w):
        assert rel_err(g, e) <= 1e-11


def uniform_grid(features, grid_size, order, dtype=torch.float64):
    """efficient-kan's knots: grid_size intervals on [-1, 1], order more on each side."""
    h = 2 / grid_size
    knots = torch.arange(-order, grid_size + order + 1, dtype=torch.float64) * h - 1
    return knots.expand(features, -1).contiguous().to(dtype)


def check_fused_against_reference(rng, args, order, dtype, bound):
    """kan_linear on the fused route, forward and every gradient, against the fp64 reference."""
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    with swisk.config.using(kan_route="fused"):
        y = swisk.ops.kan_linear(*leaves, order)
        go = torch.randn(y.shape, generator=rng, dtype=torch.float64).to(dtype)
        got = torch.autograd.grad(y, [leaves[i] for i in (0, 2, 3, 4)], go)
    dl = [t.detach().double().requires_grad_() for t in args]
    yr = reference.kan_linear(*dl, order)
    want = torch.autograd.grad(yr, [dl[i] for i in (0, 2, 3, 4)], go.double())
    assert rel_err(y, yr.detach()) <= bound, f"{dtype} y (seed {rng.initial_seed()})"
    for name, g, w in zip(("x", "base_weight", "spline_weight", "spline_scaler"), got, want):
        assert rel_err(g, w) <= bound, f"{dtype} grad {name}: {rel_err(g, w):.3g} (seed {rng.initial_seed()})"


@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize("order", [1, 3, 5])
def test_cpu_fused_blocks(rng, uniform, order):
    """The CPU fused kernels' blocking: rows past a forward block (128) and a backward tile (512),
    features past a 16-feature block with a tail, outputs past a 4-vector tile with a vector tail and a
    lane tail; uniform knots take the vector-lane bases. Forward and every gradient against the
    reference, fp64 and fp32."""
    rows, fin, fout, gs = 1100, 37, 83, 5
    for dtype, bound in ((torch.float64, 1e-11), (torch.float32, 5e-5)):
        args = make(rng, rows, fin, fout, gs, order, torch.float64)
        if uniform:
            args[1] = uniform_grid(fin, gs, order)
            args[0] = torch.rand(rows, fin, generator=rng, dtype=torch.float64) * 7 - 3.5  # some outside
            args[0][:3] = torch.tensor([-1.0, 0.2, 1.0], dtype=torch.float64)[:, None]  # on knots
        check_fused_against_reference(rng, [t.to(dtype) for t in args], order, dtype, bound)


_TILES_SCRIPT = """
import sys, torch, swisk
from swisk import reference
torch.manual_seed(int(sys.argv[1]))
worst = 0.0
for order, rows, fin, fout in ((1, 37, 5, 21), (3, 103, 9, 83), (5, 61, 3, 45), (7, 30, 4, 19)):
    grid = torch.sort(torch.rand(fin, 5 + 2 * order + 1, dtype=torch.float64) * 4 - 2, dim=1).values
    x = (torch.rand(rows, fin, dtype=torch.float64) * 4 - 2).requires_grad_()
    ws = [torch.randn(fout, fin, dtype=torch.float64).requires_grad_(),
          torch.randn(fout, fin, 5 + order, dtype=torch.float64).requires_grad_(),
          torch.randn(fout, fin, dtype=torch.float64).requires_grad_()]
    go = torch.randn(rows, fout, dtype=torch.float64)
    with swisk.config.using(kan_route="fused"):
        got = torch.autograd.grad(swisk.ops.kan_linear(x, grid, *ws, order), [x, *ws], go)
    want = torch.autograd.grad(reference.kan_linear(x, grid, *ws, order), [x, *ws], go)
    for g, w in zip(got, want):
        worst = max(worst, ((g - w).norm() / w.norm()).item())
print(worst)
"""


@pytest.mark.parametrize("registers", ["16", "32"])
def test_cpu_fused_backward_tiles(rng, registers):
    """The fused CPU backward's register tiles follow the clone's vector registers (16 without
    AVX-512, 32 with it); SWISK_CPU_VEC_REGISTERS runs either tiling here: orders 1-7, rows past the
    tiles' row groups, outputs with vector tails, fp64 gradients against the reference."""
    seed = int(torch.randint(0, 2**31, (1,), generator=rng))
    env = dict(os.environ, SWISK_CPU_VEC_REGISTERS=registers)
    out = subprocess.run([sys.executable, "-c", _TILES_SCRIPT, str(seed)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) <= 1e-11, f"{out.stdout} (seed {seed})"


def test_cpu_kernels_of_the_other_vector_width():
    """The CPU KAN kernels are built twice where GCC clones them (x86-64 Linux): in 32-byte vectors and in
    64-byte ones for AVX-512 CPUs; a process runs one (build_info's cpu_vector_bytes). The CPU fused tests
    (every path: blocks, chunks, tiles, few rows and features, direct backward, every order, non-finite
    values) run again in a process with the other width (SWISK_CPU_VEC_BYTES); 64 bytes on a CPU without
    AVX-512 run the baseline clone of that build. A value the build cannot obey is said at import."""
    info = swisk.build_info()
    assert info["cpu_vector_bytes"] in (32, 64)
    if "SWISK_CPU_VEC_BYTES" not in os.environ and info["cpu_isa"] != "avx512":
        assert info["cpu_vector_bytes"] == 32
    other = str(96 - info["cpu_vector_bytes"])
    env = dict(os.environ, SWISK_CPU_VEC_BYTES=other)
    probe = subprocess.run([sys.executable, "-W", "always", "-c",
                            "import swisk; print(swisk.build_info()['cpu_vector_bytes'])"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    if probe.stdout.strip() != other:  # said at import
        assert f"SWISK_CPU_VEC_BYTES={other}: this build has no {other}-byte CPU KAN kernels" in probe.stderr
        pytest.skip(f"this build has one CPU vector width ({probe.stdout.strip()} bytes)")
    assert "SWISK_CPU_VEC_BYTES" not in probe.stderr
    bad = subprocess.run([sys.executable, "-W", "always", "-c", "import swisk"], env=dict(env, SWISK_CPU_VEC_BYTES="48"),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 0 and "[swisk] SWISK_CPU_VEC_BYTES: expected 32 or 64, got '48'" in bad.stderr
    tests = os.path.dirname(os.path.abspath(__file__))
    keys = "cpu_fused or cpu_direct or every_order_cpu or nonfinite or few_rows or (cpu and fused)"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                          os.path.join(tests, "test_kan_linear.py"), "-k", keys], env=env, capture_output=True,
                         text=True, timeout=1800, cwd=tests)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and " failed" not in run.stdout


@pytest.mark.parametrize("fin", [1, 2, 5, 7, 10, 16])
@pytest.mark.parametrize("order", [1, 3])
def test_cpu_fused_few_features(rng, fin, order):
    """At most 16 features on uniform knots: the bases run over the (row, feature) pairs laid end to end
    as in x, a block of lanes spanning rows; rows past a forward block (128) and across backward
    threads, x outside the grid and on its knots, fp64 (8 lanes) and fp32 (16)."""
    rows, fout, gs = 700, 9, 5
    args = make(rng, rows, fin, fout, gs, order, torch.float64)
    args[1] = uniform_grid(fin, gs, order)
    args[0] = torch.rand(rows, fin, generator=rng, dtype=torch.float64) * 7 - 3.5  # some outside
    args[0][:3] = torch.tensor([-1.0, 0.2, 1.0], dtype=torch.float64)[:, None]  # on knots
    for dtype, bound in ((torch.float64, 1e-11), (torch.float32, 5e-5)):
        check_fused_against_reference(rng, [t.to(dtype) for t in args], order, dtype, bound)


@pytest.mark.parametrize("uniform", [True, False])
@pytest.mark.parametrize("order,n_basis", [(3, 1), (3, 3), (3, 4), (2, 2), (1, 1)])
@pytest.mark.parametrize("fin", [21, 3])
def test_cpu_fused_short_grids(rng, uniform, order, n_basis, fin):
    """Fewer spline rows than a basis window (n_basis < order + 1: the repacked weights gain zero rows)
    and windows clamped at both ends of the grid, x well outside it on either side."""
    rows, fout = 150, 35
    args = make(rng, rows, fin, fout, n_basis - order, order, torch.float64)
    if uniform:
        args[1] = torch.linspace(-1.0, 1.0, n_basis + order + 1, dtype=torch.float64).expand(fin, -1).contiguous()
        args[0] = torch.rand(rows, fin, generator=rng, dtype=torch.float64) * 5 - 2.5
    for dtype, bound in ((torch.float64, 1e-11), (torch.float32, 5e-5)):
        check_fused_against_reference(rng, [t.to(dtype) for t in args], order, dtype, bound)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("uniform", [True, False])
def test_cpu_fused_few_rows(rng, rows, uniform):
    """A few rows in fp32/fp64 take the forward that reads the weights as stored (each row's dense
    bases, no repacking: cpu/kan_direct.h), more rows the repacked one: vectors of columns spanning
    features (n_basis 8, and 19 past the 16 lanes), a row's tail of columns, fewer features than lanes
    and more, no base branch or no scaler, order 0 and 7; forward and every gradient."""
    for fin, fout, gs, order, base, scaler in ((37, 83, 5, 3, True, True), (3, 9, 16, 3, True, False),
                                               (17, 5, 1, 0, False, True), (1, 33, 4, 7, True, True)):
        args = make(rng, rows, fin, fout, gs, order, torch.float64, base, scaler)
        if uniform:
            args[1] = uniform_grid(fin, gs, order)
            args[0] = torch.rand(rows, fin, generator=rng, dtype=torch.float64) * 7 - 3.5  # some outside
        for dtype, bound in ((torch.float64, 1e-11), (torch.float32, 5e-5)):
            cast = [None if t is None else t.to(dtype) for t in args]
            leaves = [t if i == 1 or t is None else t.clone().requires_grad_() for i, t in enumerate(cast)]
            with swisk.config.using(kan_route="fused"):
                y = swisk.ops.kan_linear(*leaves, order)
                go = torch.randn(y.shape, generator=rng, dtype=torch.float64).to(dtype)
                ins = [t for i, t in enumerate(leaves) if i != 1 and t is not None]
                got = torch.autograd.grad(y, ins, go)
            yr = ref(*cast, order)
            assert rel_err(y, yr) <= bound, f"{dtype} y rows={rows} in={fin} (seed {rng.initial_seed()})"
            dl = [None if t is None else t.detach().double().requires_grad_(i != 1) for i, t in enumerate(cast)]
            bw = torch.zeros(fout, fin, dtype=torch.float64) if dl[2] is None else dl[2]
            want = torch.autograd.grad(reference.kan_linear(dl[0], dl[1], bw, dl[3], dl[4], order),
                                       [t for i, t in enumerate(dl) if i != 1 and t is not None], go.double())
            # x's gradient sums fout terms per value (one value when rows = in = 1), which may cancel:
            # its error is judged against the sum of the terms' magnitudes, |go| times |dy/dx|.
            scales = [x_grad_terms(dl, order, go.double())] + [w.abs().max() for w in want[1:]]
            for g, w, s in zip(got, want, scales):
                err = ((g.double() - w).abs().max() / s.max().clamp_min(1e-30)).item()
                assert err <= bound, f"{dtype} grad rows={rows} in={fin} (seed {rng.initial_seed()})"


def x_grad_terms(leaves, order, go):
    """Σ_o |go[r, o]·∂y[r, o]/∂x[r, i]| by the reference: the magnitude of the terms x's gradient sums."""
    x, grid, bw, sw, sc = (None if t is None else t.detach() for t in leaves)
    bw = torch.zeros(sw.shape[:2], dtype=sw.dtype) if bw is None else bw
    x = x.requires_grad_()
    y = reference.kan_linear(x, grid, bw, sw, sc, order)
    jac = torch.stack([torch.autograd.grad(y[:, o].sum(), x, retain_graph=True)[0] for o in range(y.shape[1])], 1)
    return (go.abs().unsqueeze(-1) * jac.abs()).sum(1)


@pytest.mark.parametrize("rows,fin,fout", [(1, 40, 400), (3, 40, 400), (4, 40, 400), (7, 40, 400), (8, 1000, 12)])
def test_cpu_direct_backward(rng, rows, fin, fout):
    """The backward of 1-8 rows reads the weights as stored (cpu/kan_direct.h): feature blocks of a
    vector across two threads' ranges with a tail block, several tiles of blocks in a range (1000
    features), rows as a template and at run time (past 4), x alone or the weights alone
    differentiated, against the reference; 1 and 2 threads give the same bits."""
    gs, order = 5, 3
    for dtype, bound in ((torch.float64, 1e-11), (torch.float32, 5e-5)):
        x, grid, bw, sw, sc = (t.to(dtype) for t in make(rng, rows, fin, fout, gs, order, torch.float64))
        go = torch.randn(rows, fout, generator=rng, dtype=torch.float64).to(dtype)
        dl = [t.detach().double().requires_grad_(i != 1) for i, t in enumerate((x, grid, bw, sw, sc))]
        want = torch.autograd.grad(reference.kan_linear(*dl, order), [dl[i] for i in (0, 2, 3, 4)], go.double())
        for wrt in ((0,), (2, 3, 4), (0, 2, 3, 4)):
            runs = []
            old = torch.get_num_threads()
            try:
                for n in (1, 2):
                    torch.set_num_threads(n)
                    leaves = [t.clone().requires_grad_(i in wrt) for i, t in enumerate((x, grid, bw, sw, sc))]
                    with swisk.config.using(kan_route="fused"):
                        y = swisk.ops.kan_linear(*leaves, order)
                        runs.append(torch.autograd.grad(y, [leaves[i] for i in wrt], go))
            finally:
                torch.set_num_threads(old)
            assert all(torch.equal(a, b) for a, b in zip(*runs)), f"{dtype} {wrt}: 1 and 2 threads differ"
            for i, g in zip(wrt, runs[1]):
                w = want[(0, 2, 3, 4).index(i)]
                assert rel_err(g, w) <= bound, f"{dtype} grad {i} rows={rows} (seed {rng.initial_seed()})"


@pytest.mark.parametrize("rows", [2, 7, 40])
def test_nan_x_gradients_as_in_the_formulation(rng, route, rows):
    """A NaN x[n, i] reaches every basis of feature i in the formulation (Cox–de Boor's products): its
    feature's spline weight (and scaler) gradients are NaN for every output and basis, the others
    finite; y and grad_x NaN in its row. Few rows (weights as stored), more (repacked), GEMM route."""
    for dtype in (torch.float64, torch.float32):
        x, grid, bw, sw, sc = make(rng, rows, 5, 3, 5, 3, dtype)
        x[1, 2] = float("nan")
        leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate((x, grid, bw, sw, sc))]
        y = swisk.ops.kan_linear(*leaves, 3)
        got = torch.autograd.grad(y.sum(), [leaves[i] for i in (0, 2, 3, 4)])
        dl = [t.detach().double().requires_grad_(i != 1) for i, t in enumerate((x, grid, bw, sw, sc))]
        yr = reference.kan_linear(*dl, 3)
        want = torch.autograd.grad(yr.sum(), [dl[i] for i in (0, 2, 3, 4)])
        assert torch.equal(y.isnan(), yr.isnan())
        for g, w in zip(got, want):
            assert torch.equal(g.isnan(), w.isnan()), f"{dtype} rows={rows}"
            fin = w.isfinite()
            assert rel_err(g[fin].reshape(-1), w[fin].reshape(-1)) <= REL[dtype]
        assert got[2][:, 2].isnan().all() and got[2][:, :2].isfinite().all()


def test_forward_mode_without_base_at_infinite_x(rng, route):
    """No base_weight means no base branch, not a zero one: at x = ±inf the bases are 0 and so is the
    feature's part of y and of its tangents (0·silu(±inf) would be NaN). jvp, jacfwd and reverse mode agree."""
    x, grid, _, sw, sc = make(rng, 4, 3, 2, 4, 3)
    x[1, 0], x[3, 2] = float("inf"), -float("inf")
    f = lambda t: swisk.ops.kan_linear(t, grid, None, sw, sc, 3)  # noqa: E731
    t = torch.randn(x.shape, generator=rng, dtype=torch.float64)
    y, jv = torch.func.jvp(f, (x,), (t,))
    rev = torch.func.jacrev(f)(x)
    assert y.isfinite().all() and jv.isfinite().all() and rev.isfinite().all()
    assert rel_err(jv, torch.einsum("noki,ki->no", rev, t)) <= REL[torch.float64]
    assert rel_err(torch.func.jacfwd(f)(x), rev) <= REL[torch.float64]
    assert rel_err(y, reference.kan_linear(x, grid, None, sw, sc, 3)) <= REL[torch.float64]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tensor_core_forward_without_base_at_infinite_x(rng, dtype):
    """The GPUs' tensor-core forward (bf16, and fp32 as tf32) without base_weight stages no silu column:
    at x = ±inf the row stays finite, as the formulation's (its zero weight would make 0·silu(inf) NaN)."""
    x, grid, _, sw, sc = make(rng, 5, 3, 4, 5, 3, dtype=torch.float32)
    x[1, 0], x[3, 2] = float("inf"), -float("inf")
    x, grid, sw, sc = (t.to(dtype) for t in (x, grid, sw, sc))  # the reference sees the rounded inputs
    want = reference.kan_linear(x.double(), grid.double(), None, sw.double(), sc.double(), 3)
    with testing.backend("cuda-emu"), swisk.config.using(kan_route="fused"), \
            testing.torch_flag(torch.backends.cuda.matmul, "allow_tf32", True):
        y = swisk.ops.kan_linear(x, grid, None, sw, sc, 3)
    assert y.isfinite().all()
    assert rel_err(y.double(), want) <= (4e-3 if dtype == torch.float32 else REL[dtype])  # tf32: 2^-11 per product


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nonfinite_weights_on_the_tensor_cores(rng, bad, dtype):
    """CUDA's tensor-core forward (bf16, fp32 as tf32; cuda-emu, and the device where present): its
    dense products with the packed weights, then the scan and fix passes, give the formulation's NaN
    and inf pattern. The other GPU forwards check every weight themselves and take no scratch for it."""
    from swisk import _C
    from swisk._backend import dtype_code

    x, grid, bw, sw, sc = make(rng, 40, 3, 4, 5, 3, torch.float32)
    x[:3] = grid[:, 0] - 1  # rows outside the grid: every basis zero
    sw[1, 2, 0] = bad
    x, grid, bw, sw, sc = (t.to(dtype) for t in (x, grid, bw, sw, sc))  # the reference sees the rounded inputs
    want = ref(*(t.double() for t in (x, grid, bw, sw, sc)), 3)
    code = dtype_code(dtype)
    assert _C.kan_linear_workspace(3, 4, 8, 3, code, "metal-emu", False, False) == 0
    assert (_C.kan_linear_workspace(3, 4, 8, 3, code, "cuda-emu", False, False) > 0) == (dtype != torch.float32)
    for b in [b for b in testing.backend_ids() if b in ("cuda-emu", "cuda")]:
        with testing.backend(b), swisk.config.using(kan_route="fused"), \
                testing.torch_flag(torch.backends.cuda.matmul, "allow_tf32", True):
            assert _C.kan_linear_workspace(3, 4, 8, 3, code, b, False, True) > 0
            dev = testing.device_of(b)
            got = swisk.ops.kan_linear(*(t.to(dev) for t in (x, grid, bw, sw, sc)), 3).double().cpu()
        assert want[:3, 1].isnan().all()
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf()), b


def test_fused_gpu_forward_is_one_dispatch(rng, monkeypatch):
    """A small layer's forward on a GPU (the fused route: launch-bound) is one kernel and no scratch:
    the 0·inf of non-finite weights is the kernel's own check (Metal's dispatch list, seen from Python)."""
    from swisk import _backend

    seen = []
    real = _backend.run_metal_dispatches
    monkeypatch.setattr(_backend, "run_metal_dispatches",
                        lambda d, t, b: (seen.extend(k for k, *_ in d), real(d, t, b))[1])
    args = make(rng, 2, 4, 4, 5, 3, torch.float32)
    with testing.backend("metal-emu"), swisk.config.using(kan_route="fused"), torch.no_grad():
        y = swisk.ops.kan_linear(*args, 3)
    assert seen == ["swisk_kan_forward_f32"]
    assert rel_err(y, ref(*args, 3)) <= REL[torch.float32]


@pytest.mark.parametrize("fin,fout,lead", [(0, 3, (4,)), (3, 0, (4,)), (3, 2, (0,)), (0, 0, (2, 0))])
def test_forward_mode_of_empty_sizes(rng, route, fin, fout, lead):
    """jvp (from the formulation) of calls without features, outputs or rows: y's shape, tangent 0 where
    y is the empty sum."""
    x, grid, bw, sw, sc = make(rng, 1, max(fin, 1), max(fout, 1), 4, 3)
    x, grid, bw, sw, sc = x.new_zeros(*lead, fin), grid[:fin], bw[:fout, :fin], sw[:fout, :fin], sc[:fout, :fin]
    f = lambda t: swisk.ops.kan_linear(t, grid, bw, sw, sc, 3)  # noqa: E731
    y, jv = torch.func.jvp(f, (x,), (torch.ones_like(x),))
    assert y.shape == jv.shape == (*lead, fout) and (jv == 0).all()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_weights_few_rows(rng, bad):
    """The few-rows forward multiplies every dense basis, zero or not, by every weight: a non-finite
    spline weight or scaler gives the formulation's NaN and inf pattern (0·inf in rows whose bases do not
    reach it), without the repacked path's fix-up."""
    for dtype in (torch.float64, torch.float32):
        x, grid, bw, sw, sc = make(rng, 4, 3, 4, 5, 3, dtype)
        x[:2] = grid[:, 0] - 1  # every basis zero
        x[2] = (grid[:, 0] + grid[:, 1]) / 2  # reaches each feature's first basis
        for w, at in ((sw, (1, 2, 0)), (sc, (2, 0))):
            w2 = w.clone()
            w2[at] = bad
            a = (x, grid, bw, w2, sc) if w is sw else (x, grid, bw, sw, w2)
            want = ref(*a, 3)
            with swisk.config.using(kan_route="fused"):
                got = swisk.ops.kan_linear(*a, 3).double()
            assert not want.isfinite().all() and want.isfinite().any()
            assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
            assert torch.equal(got.sign()[want.isinf()], want.sign()[want.isinf()])
            fin = want.isfinite()
            assert rel_err(got[fin].reshape(-1), want[fin].reshape(-1)) <= REL[dtype]


def test_infinite_scaler_few_rows_past_the_row(rng):
    """n_basis = order + 1: inside the grid every basis is non-zero, and an infinite scaler times
    positive weights gives +inf, not NaN: the lanes past the row's 12 columns must not add 0 · inf."""
    for dtype in (torch.float64, torch.float32):
        x, grid, bw, sw, sc = make(rng, 4, 3, 4, 1, 3, dtype)
        x[:, 0] = (grid[0, 3] + grid[0, 4]) / 2
        sw[1, 0] = 1.0
        sc[1, 0] = float("inf")
        want = ref(x, grid, bw, sw, sc, 3)
        with swisk.config.using(kan_route="fused"):
            got = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3).double()
        assert (want[:, 1] == float("inf")).all() and want[:, [0, 2, 3]].isfinite().all()
        assert torch.equal(got.isinf(), want.isinf()) and not got.isnan().any()


@pytest.mark.parametrize("uniform", [True, False])
def test_cpu_fused_chunks(rng, uniform):
    """The CPU fused kernels run the outputs in chunks (forward) and the features in chunks (backward)
    whose repacked weights and gradient stay within a quarter of the layer's weights (up to 16 MiB):
    here several output chunks with vector and lane tails, feature chunks with a tail past 16-feature
    blocks, and two backward row tiles in fp64."""
    from swisk import _C
    from swisk._backend import dtype_code

    rows, fin, fout, gs, order = 600, 1000, 1000, 5, 3
    for dtype, bound in ((torch.float64, 1e-11), (torch.float32, 5e-5)):
        whole = fin * (1 + gs + order) * fout  # one copy of the repacked weights (silu's, spline rows)
        for back in (False, True):  # so the kernels run in chunks
            ws = _C.kan_linear_workspace(fin, fout, gs + order, order, dtype_code(dtype), "cpu", back, False)
            assert ws < whole * 0.65
        args = make(rng, rows, fin, fout, gs, order, torch.float64)
        if uniform:
            args[1] = uniform_grid(fin, gs, order)
        check_fused_against_reference(rng, [t.to(dtype) for t in args], order, dtype, bound)


def test_cpu_fused_scratch_is_bounded(monkeypatch):
    """The kernels' scratch stays near their chunk bound, a quarter of the layer's weights within 4 (forward;
    0.5 backward) to 16 MiB (the non-finite weights' scan takes its words only when it runs): at 1024 ->
    1024, G=5 the repacked weights are 36 MiB (and as much again for their gradient), the scratch ~10 MiB.
    At 4096 -> 4096 the fused route stays within the 64 MiB workspace bound."""
    from swisk import _C
    from swisk._backend import dtype_code
    from swisk._ops import routes

    for fin, fout, n_basis in ((1024, 1024, 8), (256, 256, 8), (4096, 4096, 8), (1000, 1000, 20), (784, 64, 8)):
        quarter = fin * fout * (n_basis + 2) * 4 / 4 / 2**20  # fp32 bytes
        for back, lo in ((False, 4), (True, 0.5)):
            mib = _C.kan_linear_workspace(fin, fout, n_basis, 3, dtype_code(torch.float32), "cpu", back, False)
            assert mib * 4 / 2**20 <= min(16, max(lo, quarter)) + 0.5, (fin, fout, back, mib)
    monkeypatch.setattr(routes, "_cpu_isa", lambda: "avx512")  # without them, layers this large take the GEMM
    monkeypatch.setattr(routes, "_cpu_vendor", lambda: "amd")
    assert routes.kan_route("cpu", 1024, 4096, 4096, 8, 3) == "fused"


def test_empty_batch_and_single_feature(backend, rng, route):
    x, grid, bw, sw, sc = make(rng, 5, 1, 1, 3, 3, torch.float32)
    y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
    assert rel_err(y, ref(x, grid, bw, sw, sc, 3)) <= 2e-5
    leaves = [t.clone().requires_grad_() for t in (x[:0], bw, sw, sc)]
    y0 = swisk.ops.kan_linear(leaves[0], grid, *leaves[1:], 3)
    assert y0.shape == (0, 1)
    grads = torch.autograd.grad(y0.sum(), leaves)
    assert grads[0].shape == (0, 1) and all(torch.equal(g, torch.zeros_like(g)) for g in grads[1:])


@pytest.mark.parametrize("route", ["fused", "gemm"])
def test_same_bits_for_any_thread_count(rng, route):
    """The fused CPU kernels' reductions have a fixed order: 1 and 2 threads give bitwise equal outputs
    and gradients. The GEMM route's own kernels do too; its GEMM is the vendor's, whose summation order
    may follow the thread count: bitwise equal run to run, equal to rounding across thread counts."""
    args = make(rng, 70, 9, 11, 5, 3, torch.float32)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    go = torch.randn(70, 11, generator=rng)
    old = torch.get_num_threads()
    runs = []
    try:
        with swisk.config.using(kan_route=route):
            for n in (1, 2, 2):
                torch.set_num_threads(n)
                y = swisk.ops.kan_linear(*leaves, 3)
                runs.append((y, *torch.autograd.grad(y, [leaves[i] for i in (0, 2, 3, 4)], go)))
    finally:
        torch.set_num_threads(old)
    assert all(torch.equal(a, b) for a, b in zip(runs[1], runs[2]))
    if route == "fused":
        assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[1]))
    for a, b in zip(runs[0], runs[1]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("base,scaler", [(True, True), (False, False)])
def test_tensor_core_weight_gradient_emulated(rng, base, scaler):
    """cuda-emu runs the CUDA tensor-core weight gradient for fp16/bf16: several output and column
    tiles with tails, rows in several steps, gradients against the fp64 reference on the same inputs."""
    for dtype in (torch.float16, torch.bfloat16):
        args = make(rng, 75, 9, 70, 5, 3, dtype, base, scaler)
        leaves = [None if t is None or i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
        inputs = [a if leaf is None else leaf for a, leaf in zip(args, leaves)]
        with testing.backend("cuda-emu"):
            y = swisk.ops.kan_linear(*inputs, 3)
        go = torch.randn(y.shape, generator=rng).to(dtype)
        live = [i for i, t in enumerate(leaves) if t is not None]
        with testing.backend("cuda-emu"):
            got = torch.autograd.grad(y, [leaves[i] for i in live], go)
        dl = [None if t is None else t.detach().double().requires_grad_() for t in leaves]
        bw = dl[2] if base else torch.zeros(70, 9, dtype=torch.float64)
        yr = reference.kan_linear(dl[0], args[1].double(), bw, dl[3], dl[4], 3)
        want = torch.autograd.grad(yr, [dl[i] for i in live], go.double())
        for i, g, w in zip(live, got, want):
            assert rel_err(g, w) <= 2 * REL[dtype], f"{dtype} grad {i}: {rel_err(g, w):.3g} (seed {rng.initial_seed()})"


def test_dispatcher_and_eager_routes_agree(rng, route):
    """The public function on plain eager tensors skips torch's dispatcher; torch.ops.swisk.* goes
    through it (Autograd kernel, then the device kernel): same values and gradients."""
    args = make(rng, 11, 5, 3, 5, 3, torch.float64)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y1 = swisk.ops.kan_linear(*leaves, 3)
    g1 = torch.autograd.grad(y1.square().sum(), [t for i, t in enumerate(leaves) if i != 1])
    y2 = torch.ops.swisk.kan_linear(*leaves, 3)
    g2 = torch.autograd.grad(y2.square().sum(), [t for i, t in enumerate(leaves) if i != 1])
    torch.testing.assert_close(y1, y2, rtol=0, atol=0)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert all(g.abs().sum() > 0 for g in g1)


def test_compile_dynamic_shapes(rng, route):
    """Symbolic batch sizes: the fake kernel's shape function (with torch._check) instead of the core's."""
    f = torch.compile(lambda *a: swisk.ops.kan_linear(*a, 3).square().sum(-1), fullgraph=True, dynamic=True)
    for batch in (5, 9):
        args = make(rng, batch, 4, 3, 5, 3, torch.float32)
        torch.testing.assert_close(f(*args), ref(*args, 3).square().sum(-1).float(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_weights_propagate_as_in_the_formulation(backend, rng, route, bad):
    """The formulation multiplies every basis, zero or not, by every weight: one non-finite spline
    weight makes y NaN (0·inf) in every row whose bases do not reach it, and NaN or inf where they do,
    exactly as the reference; a non-finite scaler likewise. Rows of other outputs stay finite."""
    dtype = torch.float64 if backend == "cpu" else torch.float32
    x, grid, bw, sw, sc = make(rng, 40, 3, 4, 5, 3, dtype)
    x[:3] = grid[:, 0] - 1  # rows outside the grid: every basis zero
    sw[1, 2, 0] = bad  # the first basis of feature 2: reached by a few rows only
    want = ref(x, grid, bw, sw, sc, 3)
    got = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3).double()
    assert torch.equal(got.isnan(), want.isnan()), f"NaN pattern differs (seed {rng.initial_seed()})"
    assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got.sign()[want.isinf()], want.sign()[want.isinf()])
    assert want[:3, 1].isnan().all() and not want[:, 1].isfinite().any() and want[:, [0, 2, 3]].isfinite().all()
    fin = want.isfinite()
    assert rel_err(got[fin].reshape(-1), want[fin].reshape(-1)) <= REL[dtype]
    sc2 = sc.clone()
    sc2[2, 0] = bad
    want2, got2 = ref(x, grid, bw, sw, sc2, 3), swisk.ops.kan_linear(x, grid, bw, sw, sc2, 3).double()
    assert torch.equal(got2.isnan(), want2.isnan()) and torch.equal(got2.isinf(), want2.isinf())
