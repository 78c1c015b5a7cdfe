"""kan_linear's GEMM route (generated A tiles, torch's GEMM) and the expansion ops it is built on."""
import io
import threading
import weakref

import pytest
import torch

import swisk
from swisk import reference, testing
from swisk._ops import kan_gemm, routes, spline

from test_kan_linear import REL, make, ref, rel_err

GRAD_ARGS = (0, 2, 3, 4)  # x, base_weight, spline_weight, spline_scaler


def _grads(args, order, go):
    leaves = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    y = swisk.ops.kan_linear(*leaves, order)
    return y, torch.autograd.grad(y, [leaves[i] for i in GRAD_ARGS], go)


def _ref_grads(args, order, go):
    d = [t.double().requires_grad_() if i != 1 else t.double() for i, t in enumerate(args)]
    y = reference.kan_linear(*d, order)
    return torch.autograd.grad(y, [d[i] for i in GRAD_ARGS], go.double())


@pytest.mark.parametrize("low", [False, True])
@pytest.mark.parametrize("rows", [1, 6, 7, 8, 15, 23])
def test_tile_boundaries(backend, rng, monkeypatch, rows, low):
    """Forward tiles of 14 rows and backward tiles of 7 (two buffers): batches of 1, tile - 1, tile,
    tile + 1 and several tiles; in and out not multiples of 8. Counts the tiles generated. low: bf16,
    whose weight gradients over several tiles are summed in fp32."""
    fin, fout, g, k = 5, 11, 4, 3
    dtype = torch.bfloat16 if low else testing.dtypes_of(backend)[0]
    width = fin * (g + k + 1)
    calls = []
    real = spline._expand_into
    monkeypatch.setattr(spline, "_expand_into", lambda x, *a: (calls.append(x.shape[0]), real(x, *a)))
    args = make(rng, rows, fin, fout, g, k, dtype)
    dev = testing.device_of(backend)
    args = [t.to(dev) for t in args]
    go = torch.randn(rows, fout, generator=rng, dtype=dtype).to(dev)
    with swisk.config.using(kan_route="gemm", workspace_bytes=7 * width * args[0].element_size() * 2):
        y, got = _grads(args, k, go)
    cpu = [t.cpu() for t in args]
    assert rel_err(y.cpu(), ref(*cpu, k)) <= REL[dtype]
    for a, b in zip(got, _ref_grads(cpu, k, go.cpu())):
        assert rel_err(a.cpu(), b) <= 10 * REL[dtype]
    fwd, bwd = -(-rows // 14), -(-rows // 7)
    assert calls == [min(14, rows - 14 * t) for t in range(fwd)] + [min(7, rows - 7 * t) for t in range(bwd)]


def test_wide_sums_of_low_precision_tiles(rng):
    """fp32 sums of bf16 tile products: the GEMM's own fp32 output only where torch has that kernel
    (CUDA; never the CPU or MPS), else each product added to dst; either way the fp32 sum of the tiles."""
    assert not kan_gemm._wide_gemm("cpu") and not kan_gemm._wide_gemm("mps")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert kan_gemm._wide_gemm("cuda") == all(hasattr(op, "dtype_out") and has(op.dtype_out.name(), "CUDA")
                                              for op in (torch.ops.aten.mm, torch.ops.aten.addmm))
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    a = [torch.randn(9, 6, generator=rng).bfloat16().to(dev) for _ in range(2)]
    b = [torch.randn(6, 4, generator=rng).bfloat16().to(dev) for _ in range(2)]
    dst = torch.full((9, 4), float("nan"), device=dev)
    kan_gemm.accumulate(dst, a[0], b[0], True)
    kan_gemm.accumulate(dst, a[1], b[1], False)
    want = sum((x.double().cpu() @ y.double().cpu()) for x, y in zip(a, b))
    assert dst.dtype == torch.float32 and (dst.double().cpu() - want).abs().max() <= 2e-2 * want.abs().max()


def test_packed_weights_from_forward_to_backward(rng, monkeypatch):
    """[base_weight | spline_weight·scaler] is packed once per training step: forward packs and holds
    it for its backward, which lets it go; an in-place update between them (a version change) or a
    change through .data before the next forward (no version change) is never missed."""
    packs = []
    real = kan_gemm._pack
    monkeypatch.setattr(kan_gemm, "_pack", lambda *a: (packs.append(1), real(*a))[1])
    tokens = []  # what each hold() stored under (None: nothing held)
    hold = kan_gemm.hold
    monkeypatch.setattr(kan_gemm, "hold", lambda *a: tokens.append(hold(*a)) or tokens[-1])
    args = make(rng, 9, 4, 5, 5, 3)
    x, grid, bw, sw, sc = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(args)]
    go = torch.randn(9, 5, generator=rng, dtype=torch.float64)
    with swisk.config.using(kan_route="gemm"):
        y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        assert testing.held(y, "packed") is not None and len(packs) == 1
        y.backward(go)
        assert testing.held(y, "packed") is None and len(packs) == 1
        sw.data.mul_(0.5)  # no version change
        with torch.no_grad():
            y2 = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        assert len(packs) == 2 and len(tokens) == 1 and tokens[0] is not None  # no backward to come: nothing held
        assert rel_err(y2, ref(x.detach(), grid, bw.detach(), sw.detach(), sc.detach(), 3)) <= 1e-12
        y3 = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        with torch.no_grad():
            bw.mul_(2.0)  # version change between forward and backward: autograd refuses, as for any op
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y3.backward(go)


@pytest.mark.parametrize("grad_between", [False, True])
def test_a_later_forward_leaves_a_pending_backwards_weights(rng, grad_between):
    """W held for a pending backward is the spline weight's reused buffer: a later forward on the same
    spline_weight with another scaler and base weight (no grad, or x needing none: nothing held by it)
    packs elsewhere, so the first backward still multiplies by its own forward's weights."""
    x, grid, bw, sw, sc = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(make(rng, 9, 4, 5, 5, 3))]
    x2, bw2, sc2 = torch.randn(9, 4, generator=rng, dtype=torch.float64), 3 * bw.detach(), -sc.detach()
    go = torch.randn(9, 5, generator=rng, dtype=torch.float64)
    with swisk.config.using(kan_route="gemm"):
        y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        with torch.set_grad_enabled(grad_between):
            swisk.ops.kan_linear(x2, grid, bw2, sw, sc2, 3)
        got = torch.autograd.grad(y, (x, bw, sw, sc), go)
    want = torch.autograd.grad(ref(x, grid, bw, sw, sc, 3), (x, bw, sw, sc), go)
    for g, w in zip(got, want):
        assert rel_err(g, w) <= 1e-12


def test_held_weights_belong_to_their_forward(rng):
    """A forward recorded after weights changed through .data (their versions unchanged, as in
    gradcheck's perturbed forwards) holds its W on the same tensor under the same key: the first
    forward's backward must not take it (the held W carries its forward's token)."""
    x, grid, bw, sw, sc = [t if i == 1 else t.clone().requires_grad_() for i, t in enumerate(make(rng, 9, 4, 5, 5, 3))]
    go = torch.randn(9, 5, generator=rng, dtype=torch.float64)
    want = torch.autograd.grad(ref(x, grid, bw, sw, sc, 3), (x, bw, sw, sc), go)
    with swisk.config.using(kan_route="gemm"):
        y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        keep = sw.detach().clone()
        sw.data.mul_(3.0)
        swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)  # recorded: holds the perturbed W
        sw.data.copy_(keep)
        got = torch.autograd.grad(y, (x, bw, sw, sc), go)
    for g, w in zip(got, want):
        assert rel_err(g, w) <= 1e-12


def test_held_weights_live_with_their_graph_and_never_in_a_saved_module(rng):
    """What a forward holds for its backward lives in its autograd graph: a graph dropped without a
    backward (an evaluation with gradients on) frees the packed W; and a trained module pickles as its
    state alone (the CPU's reused W buffer is kept beside the parameters, not on them)."""
    x, grid, bw, sw, sc = make(rng, 9, 4, 5, 5, 3)
    x.requires_grad_()
    with swisk.config.using(kan_route="gemm"):
        y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        w = weakref.ref(testing.held(y, "packed"))
        assert w() is not None
        del y
        assert w() is None
        layer = swisk.nn.KANLinear(16, 8).double()
        xs = torch.randn(5, 16, generator=rng, dtype=torch.float64, requires_grad=True)
        with torch.no_grad():
            layer(xs)
        assert layer.spline_weight not in kan_gemm._SPARES  # inference keeps no W beside the weights
        ys = [layer(xs) for _ in range(2)]  # the second packs elsewhere: the first's backward is pending
        assert testing.held(ys[0], "packed") is kan_gemm._SPARES[layer.spline_weight].buffer
        assert testing.held(ys[1], "packed") is not testing.held(ys[0], "packed")
        ys[0].sum().backward()
        y = layer(xs)  # the buffer is free again: reused (a training step allocates no W)
        assert testing.held(y, "packed") is kan_gemm._SPARES[layer.spline_weight].buffer
        y.sum().backward()
    assert not any(vars(p) for p in layer.parameters())

    def pickled(obj):
        f = io.BytesIO()
        torch.save(obj, f)
        return f.tell()
    assert pickled(layer) - pickled(layer.state_dict()) < 4096  # the module's Python objects alone


def test_threads_sharing_a_layer_pack_apart(rng):
    """Two threads running forwards on layers that share one spline_weight (other scalers and base
    weights): one packs into the CPU's reused W buffer (made by a training step), the other elsewhere,
    so each gives its own layer's output bitwise."""
    first = swisk.nn.KANLinear(256, 256)
    second = swisk.nn.KANLinear(256, 256)
    second.spline_weight = first.spline_weight
    layers, xs = (first, second), [torch.randn(32, 256, generator=rng) for _ in range(2)]
    wrong = []

    def run(i):
        with torch.no_grad():
            for _ in range(40):
                wrong.append(not torch.equal(layers[i](xs[i]), want[i]))
    with swisk.config.using(kan_route="gemm"):  # the setting is the process's
        first(xs[0].clone().requires_grad_()).sum().backward()  # a training step makes the buffer
        assert first.spline_weight in kan_gemm._SPARES
        with torch.no_grad():
            want = [layer(x) for layer, x in zip(layers, xs)]
        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(wrong) == 80 and not any(wrong)


def test_a_first_layer_holds_no_packed_weights(rng, monkeypatch):
    """x needs no gradient (a network's first layer): the backward has no dA = gy·W, so forward holds
    no W for it (its memory would stay allocated until the backward) and nothing packs twice."""
    packs = []
    real = kan_gemm._pack
    monkeypatch.setattr(kan_gemm, "_pack", lambda *a: (packs.append(1), real(*a))[1])
    x, grid, bw, sw, sc = [t if i < 2 else t.clone().requires_grad_() for i, t in enumerate(make(rng, 9, 4, 5, 5, 3))]
    with swisk.config.using(kan_route="gemm"):
        y = swisk.ops.kan_linear(x, grid, bw, sw, sc, 3)
        assert testing.held(y, "packed") is None and testing.held(y, "route") is True and len(packs) == 1
        y.square().sum().backward()
    assert len(packs) == 1 and x.grad is None
    want = torch.autograd.grad(ref(x, grid, bw, sw, sc, 3).square().sum(), (bw, sw, sc))
    for g, w in zip((bw.grad, sw.grad, sc.grad), want):
        assert rel_err(g, w) <= 1e-12


def test_route_rule(monkeypatch):
    assert routes.kan_route("cpu", 100, 10, 10, 8, 8) == "gemm"  # past the fused kernels' orders
    assert routes.kan_route("cuda", 100, 10, 10, 8, 3) == "fused"  # CUDA: small layers are launch-bound
    assert routes.kan_route("cuda-emu", 4096, 2, 16, 8, 3) == "fused"  # the emulator takes the device's rule
    assert routes.kan_route("cuda", 64, 784, 64, 8, 3) == "gemm"  # CUDA: the GEMM from 256->256 up
    assert routes.kan_route("cuda", 4096, 64, 64, 8, 3) == "gemm"  # past the largest measured win
    assert routes.kan_route("mps", 100, 10, 10, 8, 3) == "gemm"  # unmeasured: the vendor GEMM
    assert routes.kan_route("metal-emu", 100, 10, 10, 8, 3) == "gemm"
    assert routes._cpu_isa() == swisk.build_info()["cpu_isa"] in ("avx512", "avx2", "baseline")
    # CPUs without AVX-512: the GEMM route for weights far out of cache from 16 rows up
    monkeypatch.setattr(routes, "_cpu_isa", lambda: "avx2")
    assert routes.kan_route("cpu", 100, 1000, 1000, 8, 3) == "gemm"
    assert routes.kan_route("cpu", 16, 2048, 2048, 8, 3) == "gemm"
    assert routes.kan_route("cpu", 15, 1000, 1000, 8, 3) == "fused"
    assert routes.kan_route("cpu", 100, 1000, 1000, 8, 3, differentiated=False) == "fused"
    assert routes.kan_route("cpu", 4096, 1024, 1024, 8, 3, differentiated=False) == "fused"  # unmeasured
    assert routes.kan_route("cpu", 1024, 256, 256, 8, 3) == "fused"
    assert routes.kan_route("cpu", 32, 512, 512, 8, 3) == "fused"
    assert routes._cpu_vendor() == swisk.build_info()["cpu_vendor"] in ("intel", "amd", "")
    # AVX-512 on an Intel CPU (MKL's AVX-512 GEMM): the GEMM route from ~4 MB of weights at 16 rows up
    monkeypatch.setattr(routes, "_cpu_isa", lambda: "avx512")
    monkeypatch.setattr(routes, "_cpu_vendor", lambda: "intel")
    assert routes.kan_route("cpu", 100, 1000, 1000, 8, 3) == "gemm"
    assert routes.kan_route("cpu", 64, 384, 384, 8, 3) == "gemm"
    assert routes.kan_route("cpu", 4096, 1024, 1024, 8, 3) == "gemm"
    assert routes.kan_route("cpu", 15, 1000, 1000, 8, 3) == "fused"
    assert routes.kan_route("cpu", 1024, 256, 256, 8, 3) == "fused"
    assert routes.kan_route("cpu", 100, 1000, 1000, 8, 3, differentiated=False) == "fused"
    # a forward alone packs W afresh: the GEMM route from 256 rows up
    assert routes.kan_route("cpu", 256, 1024, 1024, 8, 3, differentiated=False) == "gemm"
    assert routes.kan_route("cpu", 4096, 512, 512, 8, 3, differentiated=False) == "gemm"
    assert routes.kan_route("cpu", 255, 1024, 1024, 8, 3, differentiated=False) == "fused"
    assert routes.kan_route("cpu", 4096, 256, 256, 8, 3, differentiated=False) == "fused"
    assert routes.kan_route("cpu", 4096, 1024, 1024, 19, 3, differentiated=False) == "fused"  # G=16
    assert routes.kan_route("cpu", 100, 1000, 1000, 11, 3) == "gemm"  # G=8: 12 columns against 5
    assert routes.kan_route("cpu", 100, 1000, 1000, 13, 3) == "fused"  # G=10: 14 against 5
    assert routes.kan_route("cpu", 1024, 256, 256, 19, 3) == "fused"  # G=16
    monkeypatch.setattr(routes, "_cpu_vendor", lambda: "amd")  # AMD's AVX-512: MKL's AVX2 kernels
    assert routes.kan_route("cpu", 1024, 256, 256, 8, 3) == "fused"  # CPU: by the measured rule
    assert routes.kan_route("cpu", 100, 1000, 1000, 8, 3) == "fused"
    assert routes.kan_route("cpu", 4096, 1024, 1024, 8, 3) == "fused"  # in chunks within the bound
    assert routes.kan_route("cpu", 4096, 1024, 1024, 8, 3, differentiated=False) == "fused"
    assert routes.kan_route("cpu", 4, 2048, 2048, 8, 3) == "fused"
    assert routes.kan_route("cpu", 2, 1000, 1000, 8, 3) == "fused"
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert routes.kan_route("cpu", 1, 1000, 1000, 8, 3) == "fused"  # two threads share the repacking
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    # one row, one thread: fp32/fp64 read the weights as stored both ways; fp16/bf16 repack, which costs more
    assert routes.kan_route("cpu", 1, 1000, 1000, 8, 3) == "fused"
    assert routes.kan_route("cpu", 1, 1000, 1000, 8, 3, dtype=torch.float64) == "fused"
    assert routes.kan_route("cpu", 1, 1000, 1000, 8, 3, dtype=torch.bfloat16) == "gemm"
    assert routes.kan_route("cpu", 4, 8, 500_000, 8, 3) == "fused"  # no repacked chunk: any size
    assert routes.kan_route("cpu", 1, 1000, 1000, 8, 3, differentiated=False, dtype=torch.float16) == "fused"
    assert routes.kan_route("cpu", 1, 64, 64, 8, 3, dtype=torch.bfloat16) == "fused"  # tiny: the GEMM route's fixed costs
    assert routes.kan_route("cpu", 1024, 8, 500_000, 8, 3) == "gemm"  # 8 features' chunk: over 64 MiB
    with swisk.config.using(workspace_bytes=8 << 20):
        assert routes.kan_route("cpu", 4096, 1024, 1024, 8, 3) == "gemm"  # chunks over the caller's bound
    with swisk.config.using(kan_route="fused"):
        assert routes.kan_route("cuda", 100, 10, 10, 8, 3) == "fused"
        assert routes.kan_route("cpu", 100, 10, 10, 18, 15) == "gemm"
    with swisk.config.using(kan_route="gemm"):
        assert routes.kan_route("cpu", 1, 4, 4, 8, 3) == "gemm"


def test_inference_takes_the_fused_route_training_the_rule(monkeypatch, rng):
    """One bf16 row on one thread (the fused backward repacks there; fp32/fp64 rows read the weights as
    stored): a recorded forward (and its backward) take the GEMM route, a forward under no_grad the
    fused kernels."""
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    calls = []
    for name in ("forward", "backward"):
        real = getattr(kan_gemm, name)
        monkeypatch.setattr(kan_gemm, name, lambda *a, _r=real, _n=name, **kw: calls.append(_n) or _r(*a, **kw))
    layer = swisk.nn.KANLinear(1000, 1000).to(torch.bfloat16)
    x = torch.randn(1, 1000, generator=rng).to(torch.bfloat16)
    with torch.no_grad():
        y0 = layer(x)
    assert calls == []
    y1 = layer(x)
    y1.sum().backward()
    assert calls == ["forward", "backward"]
    assert rel_err(y0, y1.detach()) <= 2e-2


def test_the_backward_takes_its_forwards_route(monkeypatch, rng):
    """A route chosen around the forward alone (swisk.config.using) holds for its backward, which runs
    outside it; so do the rule's choices when the settings change in between."""
    calls = []
    real = kan_gemm.backward
    monkeypatch.setattr(kan_gemm, "backward", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    layer = swisk.nn.KANLinear(40, 30)
    x = torch.randn(64, 40, generator=rng)
    grads = []
    for route in ("gemm", "fused"):
        calls.clear()
        with swisk.config.using(kan_route=route):
            y = layer(x)
        with swisk.config.using(kan_route="fused" if route == "gemm" else "gemm"):
            y.square().sum().backward()
        assert len(calls) == (route == "gemm"), route
        grads.append(layer.spline_weight.grad)
        layer.zero_grad(set_to_none=True)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-5)


def test_config_errors():
    with pytest.raises(ValueError, match=r"\[swisk.config\] kan_route: must be one of auto, gemm, fused"):
        swisk.config.set(kan_route="fast")
    with pytest.raises(ValueError, match=r"\[swisk.config\] workspace_bytes: must be a positive int"):
        with swisk.config.using(workspace_bytes=0):
            pass
    with pytest.raises(ValueError, match=r"\[swisk.config\] name: unknown setting 'tile'"):
        swisk.config.set(tile=3)
    assert swisk.config.get("kan_route") == "auto"


def test_settings_of_blocks_ending_in_any_order():
    """using() blocks of several threads may end in any order: each block's settings come off when it
    ends (the last running block's in effect), none outlives its block, and set() under a block
    shows once the block ends."""
    config = swisk.config
    first, second = config.using(kan_route="gemm"), config.using(kan_route="fused", workspace_bytes=1 << 20)
    try:
        first.__enter__()
        second.__enter__()
        assert (config.get("kan_route"), config.get("workspace_bytes")) == ("fused", 1 << 20)
        first.__exit__(None, None, None)  # the first block's thread ends before the second's
        assert (config.get("kan_route"), config.get("workspace_bytes")) == ("fused", 1 << 20)
        config.set(workspace_bytes=32 << 20)
        assert config.get("workspace_bytes") == 1 << 20
    finally:
        second.__exit__(None, None, None)
    assert (config.get("kan_route"), config.get("workspace_bytes")) == ("auto", 32 << 20)
    assert routes.kan_route("cuda", 4096, 1024, 1024, 8, 3) == "gemm"
    config.set(workspace_bytes=64 << 20)


@pytest.mark.parametrize("order", [8, 10, 15])
def test_high_orders(backend, rng, order):
    """efficient-kan accepts spline orders past 7: the GEMM route takes them (GPUs up to 15)."""
    dtype = testing.dtypes_of(backend)[0]
    dev = testing.device_of(backend)
    args = make(rng, 13, 3, 4, 3, order, dtype)
    go = torch.randn(13, 4, generator=rng, dtype=dtype)
    y, got = _grads([t.to(dev) for t in args], order, go.to(dev))
    tol = 1e-10 if dtype == torch.float64 else 5e-4
    assert rel_err(y.cpu(), ref(*args, order)) <= tol
    for a, b in zip(got, _ref_grads(args, order, go)):
        assert rel_err(a.cpu(), b) <= 10 * tol


def test_order_limits(rng):
    args = make(rng, 3, 2, 2, 2, 16, torch.float32)
    with testing.backend("cuda-emu"):
        with pytest.raises(ValueError, match=r"\[kan_linear\] spline_order: at most 15 is supported on cuda-emu"):
            swisk.ops.kan_linear(*args, 16)
    layer = swisk.nn.KANLinear(3, 2, grid_size=3, spline_order=10)
    x = torch.rand(4, 3) * 2 - 1
    torch.testing.assert_close(layer(x), reference.kan_linear(x, layer.grid, layer.base_weight, layer.spline_weight,
                                                              layer.spline_scaler, 10))


@pytest.mark.parametrize("order,derivative", [(1, 0), (3, 0), (3, 1), (3, 2), (3, 4), (9, 3)])
@pytest.mark.parametrize("base", [True, False])
def test_kan_expand_matches_reference(backend, rng, order, derivative, base):
    dtype = testing.dtypes_of(backend)[0]
    args = make(rng, 11, 4, 1, 5, order, dtype)
    x, grid = args[0], args[1]
    x[3, 1] = float("nan")
    want = reference.kan_expand(x.double(), grid.double(), order, derivative, base)
    dev = testing.device_of(backend)
    got = swisk.ops.kan_expand(x.to(dev), grid.to(dev), order, derivative, base).cpu()
    assert got.shape == want.shape and torch.equal(got.isnan(), want.isnan())
    fin = want.isfinite()
    tol = 1e-12 if dtype == torch.float64 else 5e-5
    scale = want[fin].abs().max().clamp_min(1)
    assert ((got[fin].double() - want[fin]).abs().max() / scale).item() <= tol
    g = torch.randn(want.shape, generator=rng, dtype=dtype)
    gx = torch.ops.swisk.kan_contract(x.to(dev), grid.to(dev), g.to(dev), order, derivative + 1, base).cpu()
    gw = reference.kan_contract(x.double(), grid.double(), g.double(), order, derivative + 1, base)
    ok = gw.isfinite()
    assert torch.equal(gx.isnan(), gw.isnan())
    assert ((gx[ok].double() - gw[ok]).abs().max() / gw[ok].abs().max().clamp_min(1)).item() <= 4 * tol


def test_silu_derivatives_of_every_order_in_fp32(backend):
    """kan_expand's silu column of derivative orders 0-8 on x in [-30, 30] against autograd's derivatives
    of F.silu in fp64: within 4e-6 of the largest value in fp32 (measured 2.1e-6 at the 8th order; the
    former polynomial in σ alone reached 5.6e-2), 1e-12 in fp64; the formulation in fp32 as well."""
    dtype = testing.dtypes_of(backend)[0]
    x64 = torch.cat([torch.linspace(-30, 30, 2401, dtype=torch.float64), torch.tensor([0.0, 1e-30, -1e-30])])
    x = x64.to(dtype)
    xs = x.double().requires_grad_()
    g = torch.nn.functional.silu(xs)
    grid = torch.linspace(-1, 1, 8, dtype=dtype).view(1, -1)
    dev = testing.device_of(backend)
    tol = 1e-12 if dtype == torch.float64 else 4e-6
    for d in range(9):
        want = g.detach()
        g = torch.autograd.grad(g.sum(), xs, create_graph=True)[0] if d < 8 else g
        got = swisk.ops.kan_expand(x.view(-1, 1).to(dev), grid.to(dev), 3, d)[:, 0].cpu().double()
        scale = want.abs().max()
        assert (got - want).abs().max().item() <= tol * scale, (backend, d)
        formulation = reference.silu_derivative(x, d).double()
        assert (formulation - want).abs().max().item() <= tol * scale, d


@pytest.mark.parametrize("emu", ["cuda-emu", "metal-emu"])
def test_gpu_expansion_stored_through_staged_tiles(rng, emu):
    """The GPU expansion stages tiles of f = min(256, 4096 // n_basis) (row, feature) elements and
    stores each tile's spline columns one per thread: tiles crossing rows (in = 300 with f = 124 at
    n_basis 33; in = 3 < f = 256, several rows per tile), a last partial tile, n_basis past the stage
    (4103: direct stores), NaN inputs, with and without silu's columns; against the reference."""
    if emu not in testing.backend_ids():
        pytest.skip(f"{emu} is not built here")
    for rows, fin, g in ((7, 300, 30), (29, 3, 5), (2, 3, 4100)):
        h = 2.0 / g
        grid = (torch.arange(-3, g + 4, dtype=torch.float64) * h - 1).expand(fin, -1).contiguous()
        x = torch.rand(rows, fin, generator=rng, dtype=torch.float64) * 2.4 - 1.2
        x[rows // 2, fin // 2] = float("nan")
        x, grid = x.float(), grid.float()  # the reference sees the rounded inputs
        for base in (True, False):
            want = reference.kan_expand(x.double(), grid.double(), 3, 0, base)
            with testing.backend(emu):
                got = swisk.ops.kan_expand(x, grid, 3, 0, base).double()
            assert got.shape == want.shape and torch.equal(got.isnan(), want.isnan())
            fin_ = want.isfinite()
            # values <= 1 in fp32: a few ulps (max 1.8e-7 over 200 seeds, both emulators)
            assert (got[fin_] - want[fin_]).abs().max().item() <= 4e-7, (rows, fin, g)


def test_expansion_derivatives_of_every_order(rng):
    """bspline_basis and kan_expand differentiate to any order: gradcheck, gradgradcheck, and the
    derivative parameter equals autograd's derivative of the order below."""
    args = make(rng, 5, 3, 1, 4, 3)
    grid = args[1]
    x = (grid[:, 3] + (grid[:, -4] - grid[:, 3]) * torch.rand(5, 3, generator=rng, dtype=torch.float64))
    x = testing.away_from_knots(x, grid).requires_grad_()  # inside the grid, off the knots (derivatives jump there)
    for base in (True, False):
        f = lambda t: swisk.ops.kan_expand(t, grid, 3, 1, base)  # noqa: E731
        torch.autograd.gradcheck(f, (x,))
        torch.autograd.gradgradcheck(f, (x,))
    torch.autograd.gradcheck(lambda t: swisk.ops.bspline_basis(t, grid, 3, 2), (x,))
    b1 = swisk.ops.bspline_basis(x, grid, 3, 1)
    b0 = swisk.ops.bspline_basis(x, grid, 3, 0)
    auto = torch.autograd.grad(b0.sum(-1).sum(), x, create_graph=True)[0]
    torch.testing.assert_close(auto, b1.sum(-1).detach())
    assert torch.equal(swisk.ops.bspline_basis(x, grid, 3, 4), torch.zeros_like(b0))


@pytest.mark.parametrize("route", ["fused", "gemm"])
def test_higher_derivatives_run_on_the_kernels(rng, monkeypatch, route):
    """Second and third derivatives of kan_linear (a PINN's u_xx, its gradient in the weights) come from
    swisk's expansion kernels: the plain-torch bases are never built, and they equal the formulation's."""
    args = make(rng, 6, 3, 2, 4, 3)
    grid = args[1]
    x = (grid[:, 3] + (grid[:, -4] - grid[:, 3]) * torch.rand(6, 3, generator=rng, dtype=torch.float64))

    def uxx_and_grads(fn):
        xx = x.clone().requires_grad_()
        ws = [args[i].clone().requires_grad_() for i in (2, 3, 4)]
        u = fn(xx, grid, *ws, 3)
        (ux,) = torch.autograd.grad(u.sum(), xx, create_graph=True)
        (uxx,) = torch.autograd.grad(ux.sum(), xx, create_graph=True)
        return (uxx, *torch.autograd.grad(uxx.square().sum(), [xx, *ws]))

    want = uxx_and_grads(reference.kan_linear)
    real = reference.spline.bspline_basis

    def forbidden(*a, **k):
        raise AssertionError("the plain-torch bases were built")

    monkeypatch.setattr(reference.spline, "bspline_basis", forbidden)
    with swisk.config.using(kan_route=route):
        got = uxx_and_grads(swisk.ops.kan_linear)
    monkeypatch.setattr(reference.spline, "bspline_basis", real)
    assert want[0].abs().max() > 0
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("order", [1, 2, 3, 5, 7])
def test_uniform_knots_path(rng, dtype, order):
    """efficient-kan's uniform grids take the CPU's closed-form path: the same numbers as the recursion,
    at every knot (inner ones and both ends), outside the grid, for NaN and ±inf, values and derivatives."""
    grid = reference.kan_grid(37, 5, order, (-1.5, 2.0)).to(dtype)  # 37 features: blocks and a tail
    x = (torch.rand(9, 37, generator=rng, dtype=torch.float64) * 5 - 2.5).to(dtype)
    x[0], x[1], x[2] = grid[:, 0], grid[:, order + 2], grid[:, -1]
    x[3, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0], dtype=dtype)
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    for deriv in (0, 1):
        want = reference.kan_expand(x.double(), grid.double(), order, deriv)
        got = swisk.ops.kan_expand(x, grid, order, deriv)
        assert torch.equal(got.isnan(), want.isnan())
        fin = want.isfinite()
        assert ((got[fin].double() - want[fin]).abs().max() / want[fin].abs().max()).item() <= tol
        g = torch.randn(want.shape, generator=rng, dtype=dtype)
        gx = torch.ops.swisk.kan_contract(x, grid, g, order, deriv + 1, True)
        gw = reference.kan_contract(x.double(), grid.double(), g.double(), order, deriv + 1, True)
        ok = gw.isfinite() & (x != grid[:, 0]) & (x != grid[:, order + 2]) if deriv + 1 >= order else gw.isfinite()
        assert ((gx[ok].double() - gw[ok]).abs().max() / gw[ok].abs().max()).item() <= 10 * tol
