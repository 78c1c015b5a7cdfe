"""kan_conv1d/2d/3d on the GEMM route against the plain-torch formulation (swisk.reference.kan_conv):
geometry (stride, padding, dilation, groups), activations, tiles, memory formats, every backend's
expansion kernels, gradients of every order, compile and bad inputs."""
import pytest
import torch

import swisk
from swisk import reference, testing
from swisk._ops import conv, conv_gemm, spline

F64 = torch.float64


REL = {torch.float64: 1e-12, torch.float32: 3e-5, torch.float16: 8e-3, torch.bfloat16: 5e-2}
OPS = {1: swisk.ops.kan_conv1d, 2: swisk.ops.kan_conv2d, 3: swisk.ops.kan_conv3d}


@pytest.fixture(autouse=True, params=[False, True], ids=["separate", "merged"])
def merge(request, monkeypatch):
    """Every test with the base branch as its own convolution and, where it may, riding in the tiles
    (conv_gemm.MERGE: the GPUs' default; the CPU's is separate, so the emulators run both too)."""
    monkeypatch.setitem(conv_gemm.MERGE, "cpu", request.param)
    return request.param


def rel_err(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30)).item()


def make(rng, d, n, c, o, size, kernel, groups=1, g=5, k=3, dtype=F64, base=True, scaler=True, lead=None):
    """Random inputs on a non-uniform grid: x (N, C, *S) with values reaching past the grid."""
    r = lambda *s: torch.randn(*s, generator=rng, dtype=F64)  # noqa: E731
    knots = torch.sort(torch.rand(c, g + 2 * k + 1, generator=rng, dtype=F64) * 5 - 2.5, 1).values
    knots = knots + torch.arange(g + 2 * k + 1, dtype=F64) * 1e-3  # strictly increasing
    nb = g + k
    ks = (kernel,) * d
    x = r(*(lead if lead is not None else (n,)), c, *((size,) * d)) * 1.3
    bw = r(o, c // groups, *ks) * 0.3 if base else None
    sw = r(o, c // groups * nb, *ks) * 0.3
    sc = r(o, c // groups, *ks) if scaler else None
    cast = lambda t: None if t is None else t.to(dtype)  # noqa: E731
    return [cast(t) for t in (x, knots, bw, sw, sc)]


def ref(args, k, stride, pads, dilation, groups, act="silu"):
    return reference.kan_conv(*[None if t is None else t.double() for t in args], k, stride, pads, dilation, groups,
                              act)


def _pads(p, d):
    return [v for _ in range(d) for v in (p, p)]


GEOMETRY = [  # d, size, kernel, stride, padding, dilation, groups
    (2, 7, 3, 1, 1, 1, 1),
    (2, 8, 3, 2, 0, 1, 2),
    (2, 9, 2, 1, "same", 2, 1),
    (2, 6, 3, 3, 2, 1, 1),
    (2, 5, 1, 1, "valid", 1, 4),
    (1, 11, 3, 2, 1, 1, 2),
    (1, 9, 4, 1, "same", 1, 1),
    (3, 5, 3, 1, 1, 1, 1),
    (3, 6, 2, 2, 0, 2, 2),
]


def _geom_args(d, size, kernel, stride, padding, dilation):
    if padding == "same":
        total = dilation * (kernel - 1)
        pads = [v for _ in range(d) for v in (total // 2, total - total // 2)]
    else:
        pads = _pads(0 if padding == "valid" else padding, d)
    return [stride] * d, pads, [dilation] * d


@pytest.mark.parametrize("geom", GEOMETRY, ids=str)
def test_forward_and_gradients_fp64(rng, geom):
    d, size, kernel, stride, padding, dilation, groups = geom
    args = make(rng, d, 2, 4, 8, size, kernel, groups)
    st, pads, dil = _geom_args(d, size, kernel, stride, padding, dilation)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = OPS[d](*leaves, 3, stride, padding, dilation, groups)
    want = ref(leaves, 3, st, pads, dil, groups)
    assert y.shape == want.shape
    assert rel_err(y, want) <= REL[F64]
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    moving = [leaves[i] for i in (0, 2, 3, 4)]
    got = torch.autograd.grad(y, moving, go)
    exp = torch.autograd.grad(want, moving, go)
    for a, b in zip(got, exp):
        assert a.shape == b.shape and rel_err(a, b) <= 10 * REL[F64]


def test_known_answer_one_pixel():
    """A 1×1 input, 1×1 kernel, identity base: y = base_weight·x + Σ_j spline_weight[j]·B_j(x), with
    efficient-kan's default grid and x = 0 giving the bases [0, 0, 1/48, 23/48, 23/48, 1/48, 0, 0]."""
    grid = torch.linspace(-2.2, 2.2, 12, dtype=F64).view(1, -1)
    x = torch.zeros(1, 1, 1, 1, dtype=F64)
    sw = torch.arange(1.0, 9.0, dtype=F64).view(1, 8, 1, 1)
    bw = torch.full((1, 1, 1, 1), 3.0, dtype=F64)
    y = swisk.ops.kan_conv2d(x, grid, bw, sw, None, 3, base_activation="identity")
    want = (3 * 1 + 4 * 23 + 5 * 23 + 6 * 1) / 48
    assert y.shape == (1, 1, 1, 1) and abs(y.item() - want) < 1e-14


@pytest.mark.parametrize("act", ["silu", "gelu", "identity"])
@pytest.mark.parametrize("base,scaler", [(True, True), (False, True), (True, False), (False, False)])
def test_activations_and_optional_weights(rng, act, base, scaler):
    args = make(rng, 2, 3, 4, 5, 6, 3, base=base, scaler=scaler)
    leaves = [t if t is None or i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = swisk.ops.kan_conv2d(*leaves, 3, 1, 1, 1, 1, act)
    want = ref(leaves, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1, act)
    assert rel_err(y, want) <= REL[F64]
    moving = [t for i, t in enumerate(leaves) if i != 1 and t is not None]
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    for a, b in zip(torch.autograd.grad(y, moving, go), torch.autograd.grad(want, moving, go)):
        assert rel_err(a, b) <= 10 * REL[F64]


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("workspace", [1, 3000, 20000, 1 << 26])
def test_tiles_within_and_across_images(rng, monkeypatch, workspace, stride):
    """Tiles of one output row, of several rows of one image, of several images and of everything:
    the same numbers. A tile of whole images expands their pixels (the convolutions pad), a tile of rows
    the padded input rows it reads."""
    images = 3
    args = make(rng, 2, images, 3, 4, 7, 3, groups=1)
    seen = []
    real = spline._expand_into
    monkeypatch.setattr(conv, "_expand_into", lambda p, *a: (seen.append(p.numel() // 3), real(p, *a)))
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    with swisk.config.using(workspace_bytes=workspace):
        y = swisk.ops.kan_conv2d(*leaves, 3, stride, 1, 1, 1)
        go = torch.randn(y.shape, generator=rng, dtype=F64)
        got = torch.autograd.grad(y, [leaves[i] for i in (0, 2, 3, 4)], go)
    want = ref(leaves, 3, [stride] * 2, [1, 1, 1, 1], [1, 1], 1)
    assert rel_err(y, want) <= REL[F64]
    for a, b in zip(got, torch.autograd.grad(want, [leaves[i] for i in (0, 2, 3, 4)], go)):
        assert rel_err(a, b) <= 10 * REL[F64]
    out_rows = y.shape[2]
    if workspace == 1:   # one output row per tile: it reads kernel-height padded input rows
        assert len(seen) == 2 * images * out_rows and max(seen) == 3 * 9
    if workspace == 1 << 26:  # one tile, forward and backward, of the 7x7 unpadded pixels
        assert seen == [images * 49] * 2


@pytest.mark.parametrize("kernel", [2, 4])
def test_asymmetric_padding_pads_the_input(rng, monkeypatch, kernel):
    """'same' with an even kernel pads one more after than before: the convolutions cannot pad that, so
    the input is padded (-inf, bases 0) and each tile expands the padded pixels."""
    images = 2
    args = make(rng, 2, images, 3, 4, 7, kernel, groups=1)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    seen = []
    real = spline._expand_into
    monkeypatch.setattr(conv, "_expand_into", lambda p, *a: (seen.append(p.numel() // 3), real(p, *a)))
    y = swisk.ops.kan_conv2d(*leaves, 3, 1, "same", 1, 1)
    total = kernel - 1
    pads = [total // 2, total - total // 2] * 2
    want = ref(leaves, 3, [1, 1], pads, [1, 1], 1)
    assert y.shape == want.shape == (images, 4, 7, 7)
    assert rel_err(y, want) <= REL[F64]
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    moving = [leaves[i] for i in (0, 2, 3, 4)]
    for a, b in zip(torch.autograd.grad(y, moving, go), torch.autograd.grad(want, moving, go)):
        assert rel_err(a, b) <= 10 * REL[F64]
    assert seen == [images * (7 + total) ** 2] * 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_backend(backend, rng, dtype):
    """The expansion and contraction kernels of every backend (cpu, cuda-emu, metal-emu, real GPUs)."""
    if dtype not in testing.dtypes_of(backend):
        pytest.skip("fp64 runs on the CPU backend only")
    dev = testing.device_of(backend)
    args = [None if t is None else t.to(dev) for t in make(rng, 2, 2, 3, 4, 6, 3, groups=1, dtype=dtype)]
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = swisk.ops.kan_conv2d(*leaves, 3, 1, 1, 1, 1)
    cpu = [t.detach().cpu() for t in leaves]
    want = ref(cpu, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1)
    assert rel_err(y.cpu(), want) <= REL[dtype]
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    got = torch.autograd.grad(y, [leaves[i] for i in (0, 2, 3, 4)], go.to(dev, dtype))
    d = [t.double().requires_grad_() if i != 1 else t.double() for i, t in enumerate(cpu)]
    exp = torch.autograd.grad(ref(d, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1), [d[i] for i in (0, 2, 3, 4)], go)
    for a, b in zip(got, exp):
        assert rel_err(a.cpu(), b) <= 10 * REL[dtype]


@pytest.mark.parametrize("d", [2, 3])
def test_channels_last_in_channels_last_out(rng, d):
    args = make(rng, d, 2, 4, 5, 5, 3)
    fmt = torch.channels_last if d == 2 else torch.channels_last_3d
    x = args[0].contiguous(memory_format=fmt)
    y = OPS[d](x, *args[1:], 3, 1, 1)
    assert y.is_contiguous(memory_format=fmt) and not y.is_contiguous()
    want = ref(args, 3, [1] * d, _pads(1, d), [1] * d, 1)
    assert rel_err(y, want) <= REL[F64]
    yc = OPS[d](args[0], *args[1:], 3, 1, 1)
    assert yc.is_contiguous()


def test_leading_shapes_and_non_contiguous(rng):
    """Unbatched (C, H, W), several leading dims, a transposed (non-contiguous) input and an expanded
    (stride 0) grid."""
    args = make(rng, 2, 1, 3, 4, 6, 3, lead=(2, 3))
    y = swisk.ops.kan_conv2d(*args, 3, 1, 1)
    assert y.shape == (2, 3, 4, 6, 6)
    assert rel_err(y, ref(args, 3, [1, 1], _pads(1, 2), [1, 1], 1)) <= REL[F64]
    one = swisk.ops.kan_conv2d(args[0][0, 0], *args[1:], 3, 1, 1)
    assert rel_err(one, y[0, 0]) <= REL[F64]
    shared = torch.linspace(-2.2, 2.2, 12, dtype=F64)
    expanded = swisk.ops.kan_conv2d(args[0], shared.expand(3, -1), *args[2:], 3, 1, 1)
    contiguous = swisk.ops.kan_conv2d(args[0], shared.expand(3, -1).contiguous(), *args[2:], 3, 1, 1)
    assert torch.equal(expanded, contiguous)
    xt = args[0].transpose(-1, -2)
    assert rel_err(swisk.ops.kan_conv2d(xt, *args[1:], 3, 1, 1),
                   ref([xt, *args[1:]], 3, [1, 1], _pads(1, 2), [1, 1], 1)) <= REL[F64]


def test_gradcheck_and_gradgradcheck(rng):
    args = make(rng, 2, 1, 2, 2, 4, 2, g=3, k=2)
    args[0] = testing.away_from_knots(args[0] * 0.6, args[1], dim=1)  # the second derivative jumps at knots
    x, grid, bw, sw, sc = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    f = lambda x, bw, sw, sc: swisk.ops.kan_conv2d(x, grid, bw, sw, sc, 2, 1, 1, 1, 1)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x, bw, sw, sc))
    assert torch.autograd.gradgradcheck(f, (x, bw, sw, sc))


def test_forward_mode_and_vmap(rng):
    args = make(rng, 1, 2, 2, 3, 6, 3)
    x, grid, bw, sw, sc = args
    f = lambda x: swisk.ops.kan_conv1d(x, grid, bw, sw, sc, 3, 1, 1)  # noqa: E731
    t = torch.randn(x.shape, generator=rng, dtype=F64)
    _, jv = torch.func.jvp(f, (x,), (t,))
    _, want = torch.func.jvp(lambda x: ref([x, grid, bw, sw, sc], 3, [1], [1, 1], [1], 1), (x,), (t,))
    assert rel_err(jv, want) <= 1e-10
    batched = torch.func.vmap(f)(x.unsqueeze(1).expand(2, 3, 2, 6).contiguous())
    assert rel_err(batched[:, 0], f(x)) <= REL[F64]


def test_opcheck_and_compile(rng):
    args = make(rng, 2, 2, 2, 3, 5, 3, dtype=torch.float32)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    scalars = (3, [1, 1], [1, 1, 1, 1], [1, 1], 1, "silu")
    torch.library.opcheck(torch.ops.swisk.kan_conv.default, (*leaves, *scalars))
    xl = leaves[0].detach().contiguous(memory_format=torch.channels_last)
    torch.library.opcheck(torch.ops.swisk.kan_conv.default, (xl, *args[1:], *scalars))
    gy = torch.randn(2, 3, 5, 5, generator=rng)
    for need in ((True, True), (False, True), (True, False)):
        torch.library.opcheck(torch.ops.swisk.kan_conv_backward.default, (*args, gy, *scalars, *need))
    f = torch.compile(lambda *a: swisk.ops.kan_conv2d(*a, 3, 1, 1), fullgraph=True)
    y = f(*leaves)
    assert rel_err(y, swisk.ops.kan_conv2d(*leaves, 3, 1, 1)) == 0
    y.sum().backward()
    assert leaves[3].grad is not None and leaves[3].grad.abs().sum() > 0
    # the same input in channels_last: the recompile traces symbolic strides (fake_shapes, not prepare's cache)
    xc = leaves[0].detach().contiguous(memory_format=torch.channels_last)
    assert rel_err(f(xc, *leaves[1:]), swisk.ops.kan_conv2d(xc, *leaves[1:], 3, 1, 1)) <= REL[torch.float32]


def test_autocast_bf16(rng):
    args = make(rng, 2, 2, 3, 4, 6, 3, dtype=torch.float32)
    args[1] = torch.linspace(-2.2, 2.2, 12).expand(3, -1).contiguous()  # knots bf16 resolves
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = swisk.ops.kan_conv2d(*args, 3, 1, 1)
    assert y.dtype == torch.bfloat16
    cast = [t.to(torch.bfloat16) for t in args]
    assert rel_err(y, ref(cast, 3, [1, 1], _pads(1, 2), [1, 1], 1)) <= REL[torch.bfloat16]


def test_empty_batch_channels_and_nan_propagation(rng):
    args = make(rng, 2, 0, 2, 3, 5, 3)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = swisk.ops.kan_conv2d(*leaves, 3, 1, 1)
    assert y.shape == (0, 3, 5, 5)
    y.sum().backward()
    assert leaves[2].grad.abs().sum() == 0 and leaves[3].grad.abs().sum() == 0
    x = torch.randn(2, 0, 5, 5, dtype=F64, requires_grad=True)  # no input channels: the empty sum
    y = swisk.ops.kan_conv2d(x, args[1][:0], torch.randn(4, 0, 3, 3, dtype=F64), torch.randn(4, 0, 3, 3, dtype=F64),
                             None, 3, 1, 1)
    assert y.shape == (2, 4, 5, 5) and (y == 0).all()
    y.sum().backward()
    assert x.grad.shape == x.shape
    args = make(rng, 2, 1, 2, 3, 5, 3)
    args[3] = args[3].clone()
    args[3][1, 0, 0, 0] = float("nan")  # reaches every output pixel of channel 1 (0 · NaN)
    y = swisk.ops.kan_conv2d(*args, 3, 1, 1)
    want = ref(args, 3, [1, 1], _pads(1, 2), [1, 1], 1)
    assert torch.equal(y.isnan(), want.isnan()) and y[0, 1].isnan().all()


@pytest.mark.parametrize("c,o,n", [(0, 4, 2), (2, 0, 2), (0, 0, 1), (2, 4, 0)])
def test_forward_mode_of_empty_sizes(rng, c, o, n):
    """Tangents (from the formulation) of calls without input channels, outputs or images: the empty
    sum, 0, in y's shape, as the op's own forward gives it (torch's convolutions refuse or drop those)."""
    x = torch.randn(n, c, 5, 6, generator=rng, dtype=F64)
    grid = make(rng, 2, 1, max(c, 1), 1, 5, 3)[1][:c]
    sw, bw = torch.randn(o, c * 8, 3, 2, dtype=F64), torch.randn(o, c, 3, 2, dtype=F64)
    for base in (bw, None):
        f = lambda x: swisk.ops.kan_conv2d(x, grid, base, sw, None, 3, (2, 1), 1)  # noqa: E731
        y, jv = torch.func.jvp(f, (x,), (torch.randn(x.shape, generator=rng, dtype=F64),))
        assert y.shape == jv.shape == (n, o, 3, 7) and (jv == 0).all()
        assert ref([x, grid, base, sw, None], 3, [2, 1], [1] * 4, [1, 1], 1).shape == y.shape


def test_bad_inputs(rng):
    x, grid, bw, sw, sc = make(rng, 2, 1, 4, 4, 5, 3, groups=2)
    op = swisk.ops.kan_conv2d
    cases = [
        (lambda: op(x, grid, bw, sw, sc, groups=3), ValueError, r"\[kan_conv2d\] groups"),
        (lambda: op(x, grid, bw, sw, sc, groups=1), ValueError, r"\[kan_conv2d\] spline_weight"),
        (lambda: op(x, grid[:3], bw, sw, sc, groups=2), ValueError, r"\[kan_conv2d\] grid"),
        (lambda: op(x, grid, bw[:, :1], sw, sc, groups=2), ValueError, r"\[kan_conv2d\] base_weight"),
        (lambda: op(x, grid, bw, sw, sc[..., :2], groups=2), ValueError, r"\[kan_conv2d\] spline_scaler"),
        (lambda: op(x.float(), grid, bw, sw, sc, groups=2), TypeError, r"\[kan_conv2d\] grid"),
        (lambda: op(x, grid, bw, sw, sc, 3, 2, "same", groups=2), ValueError, r"\[kan_conv2d\] padding"),
        (lambda: op(x, grid, bw, sw, sc, 3, 1, "full", groups=2), ValueError, r"\[kan_conv2d\] padding"),
        (lambda: op(x, grid, bw, sw, sc, 3, 0, groups=2), ValueError, r"\[kan_conv2d\] stride"),
        (lambda: op(x, grid, bw, sw, sc, 3, (1, 2, 3), groups=2), TypeError, r"\[kan_conv2d\] stride"),
        (lambda: op(x, grid, bw, sw, sc, 3, 1, -1, groups=2), ValueError, r"\[kan_conv2d\] padding"),
        (lambda: op(x, grid, bw, sw, sc, 3, 1, 2**31, groups=2), ValueError, r"\[kan_conv2d\] padding: every value"),
        (lambda: op(x, grid, bw, sw, sc, 3, 1, 2**31 - 2, groups=2), ValueError, r"\[kan_conv2d\] padding: the padded"),
        (lambda: op(x, grid, bw, sw, sc, 3, 1, 2**25, groups=2), ValueError, r"\[kan_conv2d\] padding: the padded input"),
        (lambda: op(x, grid, bw, sw, sc, 3, 1, 0, 2**40, groups=2), ValueError, r"\[kan_conv2d\] dilation: every value"),
        (lambda: op(x, grid, bw, sw, sc, 3, 1, 0, 4, groups=2), ValueError, r"\[kan_conv2d\] x"),
        # an empty spatial dimension (torch's convolutions refuse it), even when the padding makes room
        (lambda: op(x[..., :0], grid, bw, sw, sc, 3, 1, 2, groups=2), ValueError,
         r"\[kan_conv2d\] x: spatial sizes must be >= 1"),
        (lambda: op(x, grid, bw, sw, sc, 2, groups=2), ValueError, r"\[kan_conv2d\] spline_weight"),
        (lambda: op(x, grid, bw, sw, sc, base_activation="relu", groups=2), ValueError,
         r"\[kan_conv2d\] base_activation"),
        (lambda: op(x, grid, bw, sw[..., 0], sc, groups=2), ValueError, r"\[kan_conv2d\] spline_weight"),
        (lambda: swisk.ops.kan_conv1d(x, grid, bw, sw, sc, groups=2), ValueError, r"\[kan_conv1d\] spline_weight"),
        (lambda: op(x, grid.flip(1), bw, sw, sc, groups=2), ValueError, r"\[kan_conv2d\] grid"),
        (lambda: op(x.int(), grid, bw, sw, sc, groups=2), TypeError, r"\[kan_conv2d\] x"),
        (lambda: op(x, grid, bw, sw, sc, 3.0, groups=2), TypeError, r"\[kan_conv2d\] spline_order"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()
    assert op(x[:0, ..., :0], grid, bw, sw, sc, 3, 1, 2, groups=2).shape == (0, 4, 7, 2)  # no rows: empty


def test_no_input_gradient_when_x_needs_none(rng, monkeypatch):
    """A first layer (x without requires_grad): the weight gradients, and no dx work at all."""
    args = make(rng, 2, 2, 3, 4, 6, 3)
    calls = []
    real = spline._contract_into
    monkeypatch.setattr(conv, "_contract_into", lambda *a: (calls.append(1), real(*a)))
    leaves = [t if i <= 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = swisk.ops.kan_conv2d(*leaves, 3, 1, 1)
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    got = torch.autograd.grad(y, leaves[2:], go)
    assert calls == []
    want = ref(leaves, 3, [1, 1], _pads(1, 2), [1, 1], 1)
    for a, b in zip(got, torch.autograd.grad(want, leaves[2:], go)):
        assert rel_err(a, b) <= 10 * REL[F64]


@pytest.mark.parametrize("need_x,need_weights", [(False, True), (True, False)])
def test_backward_computes_only_what_is_needed(rng, need_x, need_weights):
    """The backward op's unneeded gradients come back empty; the needed ones match the formulation's,
    directly and through autograd (frozen weights, or an input that needs no gradient)."""
    x, grid, bw, sw, sc = make(rng, 2, 2, 3, 4, 6, 3)
    scalars = (3, [1, 1], [1, 1, 1, 1], [1, 1], 1, "silu")
    y = swisk.ops.kan_conv2d(x, grid, bw, sw, sc, 3, 1, 1)
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    got = torch.ops.swisk.kan_conv_backward(x, grid, bw, sw, sc, go, *scalars, need_x, need_weights)
    leaves = [t.clone().requires_grad_() for t in (x, bw, sw, sc)]
    want = torch.autograd.grad(ref([leaves[0], grid, *leaves[1:]], 3, [1, 1], _pads(1, 2), [1, 1], 1), leaves, go)
    for g, w, n in zip(got, want, (need_x, need_weights, need_weights, need_weights)):
        assert (rel_err(g, w) <= 10 * REL[F64]) if n else g.numel() == 0
    moving = [x.clone().requires_grad_(need_x)] + [t.clone().requires_grad_(need_weights) for t in (bw, sw, sc)]
    live = [i for i, t in enumerate(moving) if t.requires_grad]
    y = swisk.ops.kan_conv2d(moving[0], grid, *moving[1:], 3, 1, 1)
    for i, g in zip(live, torch.autograd.grad(y, [moving[i] for i in live], go)):
        assert rel_err(g, want[i]) <= 10 * REL[F64]


@pytest.mark.parametrize("channels", [1, 5, 70])
def test_pixels_grouped_into_rows(rng, channels):
    """Few channels: the expansion kernels take m pixels per row (m·C features); any C, any pixel count."""
    args = make(rng, 2, 3, channels, 2, 5, 3)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = swisk.ops.kan_conv2d(*leaves, 3, 1, 1)
    want = ref(leaves, 3, [1, 1], _pads(1, 2), [1, 1], 1)
    assert rel_err(y, want) <= REL[F64]
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    for a, b in zip(torch.autograd.grad(y, leaves[:1], go), torch.autograd.grad(want, leaves[:1], go)):
        assert rel_err(a, b) <= 10 * REL[F64]


def test_torch_func_transforms(rng):
    """torch.func.grad, jacrev, hessian (jacfwd of jacrev) and per-sample gradients (vmap of grad) through
    kan_conv2d, whose int-list arguments travel as one leaf, against the formulation."""
    x, grid, bw, sw, sc = make(rng, 2, 1, 2, 3, 3, 3)
    f = lambda x: swisk.ops.kan_conv2d(x, grid, bw, sw, sc, 3, 1, 1)  # noqa: E731
    r = lambda x: ref([x, grid, bw, sw, sc], 3, [1, 1], _pads(1, 2), [1, 1], 1)  # noqa: E731
    assert rel_err(torch.func.grad(lambda x: f(x).square().sum())(x),
                   torch.func.grad(lambda x: r(x).square().sum())(x)) <= 1e-11
    assert rel_err(torch.func.jacrev(f)(x), torch.func.jacrev(r)(x)) <= 1e-11
    assert rel_err(torch.func.hessian(lambda x: f(x).square().sum())(x),
                   torch.func.hessian(lambda x: r(x).square().sum())(x)) <= 1e-10
    xb = torch.randn(3, 2, 3, 3, generator=rng, dtype=F64)
    per = torch.func.vmap(torch.func.grad(lambda s, xi: swisk.ops.kan_conv2d(xi[None], grid, bw, s, sc, 3, 1, 1)
                                          .sum()), in_dims=(None, 0))(sw, xb)
    for i in range(3):
        want = torch.func.grad(lambda s: ref([xb[i:i + 1], grid, bw, s, sc], 3, [1, 1], _pads(1, 2), [1, 1], 1)
                               .sum())(sw)
        assert rel_err(per[i], want) <= 1e-11


@pytest.mark.parametrize("act,groups,padding", [("silu", 1, 1), ("gelu", 1, 1), ("silu", 2, 1), ("silu", 1, "same")])
def test_base_branch_rides_in_the_tiles(rng, monkeypatch, merge, act, groups, padding):
    """Merged (silu, one group, symmetric padding): one convolution per tile forward and one convolution
    backward, the contraction giving the whole dx; otherwise the base branch's own. Same numbers."""
    kernel = 2 if padding == "same" else 3  # 'same' with an even kernel: asymmetric, the input padded
    args = make(rng, 2, 2, 4, 4, 6, kernel, groups=groups)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    calls = []
    fwd, bwd = conv_gemm._CONV, torch.ops.aten.convolution_backward
    monkeypatch.setattr(conv_gemm, "_CONV", tuple((lambda f: lambda *a: (calls.append("fwd"), f(*a))[1])(f)
                                                  for f in fwd))
    y = swisk.ops.kan_conv2d(*leaves, 3, 1, padding, 1, groups, act)
    pads = _pads(1, 2) if padding == 1 else [0, 1, 0, 1]
    want = ref(leaves, 3, [1, 1], pads, [1, 1], groups, act)
    assert rel_err(y, want) <= REL[F64]
    merged = merge and act == "silu" and groups == 1 and padding == 1
    assert calls == ["fwd"] * (1 if merged else 2)
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    moving = [leaves[i] for i in (0, 2, 3, 4)]
    monkeypatch.setattr(torch.ops.aten, "convolution_backward", lambda *a: (calls.append("bwd"), bwd(*a))[1])
    calls.clear()
    got = torch.autograd.grad(y, moving, go)
    assert calls == ["bwd"] * (1 if merged else 2)
    for a, b in zip(got, torch.autograd.grad(want, moving, go)):
        assert rel_err(a, b) <= 10 * REL[F64]


def test_backward_reuses_the_forwards_weight(rng, monkeypatch):
    """spline_weight·scaler (with base_weight's channels when merged) is formed once per step: the backward
    takes the forward's while the weights are unchanged, and forms its own after a retained graph's first
    backward took it, or when x needs no gradient (nothing held)."""
    made = []
    real = conv_gemm.scaled_spline_weight
    monkeypatch.setattr(conv_gemm, "scaled_spline_weight", lambda *a: (made.append(1), real(*a))[1])
    args = make(rng, 2, 2, 3, 4, 6, 3)
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = swisk.ops.kan_conv2d(*leaves, 3, 1, 1)
    go = torch.randn(y.shape, generator=rng, dtype=F64)
    first = torch.autograd.grad(y, leaves[:1] + leaves[2:], go, retain_graph=True)
    assert len(made) == 1
    again = torch.autograd.grad(y, leaves[:1] + leaves[2:], go)
    assert len(made) == 2
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    frozen_x = [leaves[0].detach()] + leaves[1:]
    y = swisk.ops.kan_conv2d(*frozen_x, 3, 1, 1)
    torch.autograd.grad(y, leaves[2:], go)
    assert len(made) == 4
