"""On a CUDA machine: streams, CUDA graphs, autocast and compile with the real kernels."""
import copy

import pytest
import torch
import torch.nn.functional as F

import swisk

pytestmark = pytest.mark.skipif(not swisk.backends()["cuda"], reason="needs a CUDA device")


def _models(rng):
    torch.manual_seed(rng.initial_seed())
    return swisk.nn.KAN([16, 32, 4], grid_size=5).cuda(), swisk.nn.WaveletKANLinear(16, 8, batch_norm=False).cuda()


def test_launches_go_to_the_current_stream():
    """The handle the kernels launch on is the current stream's, on the default and on a side stream."""
    from swisk import _backend
    x = torch.empty(1, device="cuda")  # only its device matters
    assert _backend.stream_for(x) == torch.cuda.current_stream().cuda_stream
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert _backend.stream_for(x) == side.cuda_stream != torch.cuda.default_stream().cuda_stream


def test_non_default_stream_gives_the_same_results(rng):
    kan, wav = _models(rng)
    x = torch.randn(512, 16, device="cuda")
    want = (kan(x), wav(x))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = (kan(x), wav(x))
    torch.cuda.current_stream().wait_stream(side)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def _train_step(model, x, t, lr=0.05):
    loss = F.mse_loss(model(x), t)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
            p.grad = None
    return loss.detach()


def test_cuda_graph_capture_of_a_training_step(rng):
    """No host synchronisation and no allocation outside torch in the launch path: a whole KAN
    training step captures into a CUDA graph and replays like the eager step."""
    model, _ = _models(rng)
    twin = copy.deepcopy(model)
    x, t = torch.randn(64, 16, device="cuda"), torch.randn(64, 4, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as torch's recipe asks
        for _ in range(2):
            _train_step(model, x, t)
            _train_step(twin, x, t)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = _train_step(model, x, t)
    for _ in range(3):
        x.copy_(torch.randn(64, 16, device="cuda"))
        graph.replay()
        want = _train_step(twin, x, t)
        torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_cuda_graph_capture_of_sketches(rng):
    """Sparse-sign sketches (whose eager calls read a non-finite flag back) and the other kinds capture
    into a CUDA graph, forward and backward, and replay like eager calls, an inf row included."""
    x = torch.randn(8, 4096, device="cuda", generator=None, requires_grad=True)
    g = torch.randn(8, 512, device="cuda")

    def step():
        x.grad = None
        ys = [swisk.ops.sketch(x, kind, 512, 7, 8) for kind in ("sparse_sign", "gaussian")]
        torch.autograd.backward(ys, [g, g])
        return ys

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ys = step()
    for bad in (False, True):
        with torch.no_grad():
            x.copy_(torch.randn(8, 4096, device="cuda"))
            if bad:
                x[3, 10] = float("inf")
        graph.replay()
        got = [y.clone() for y in ys] + [x.grad.clone()]
        want = step() + [x.grad]
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, equal_nan=True)


def test_autocast_bf16(rng):
    kan, _ = _models(rng)
    x = torch.randn(256, 16, device="cuda")
    want = kan(x)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got = kan(x)
    assert got.dtype == torch.bfloat16
    assert ((got.float() - want).abs().max() / want.abs().max()).item() <= 3e-2


def test_compile_fullgraph_training_step(rng):
    kan, _ = _models(rng)
    x, t = torch.randn(64, 16, device="cuda"), torch.randn(64, 4, device="cuda")
    step = torch.compile(lambda m: F.mse_loss(m(x), t), fullgraph=True)
    eager = F.mse_loss(kan(x), t)
    torch.testing.assert_close(step(kan), eager)
    step(kan).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in kan.parameters())
