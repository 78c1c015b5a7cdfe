"""The benchmark's own machinery: interleaved pair timing, per-route rows, runs per thread count."""
import gc
import json
import subprocess
import sys
import time

import pytest
import torch

from swisk.bench import all_cases, runner


def test_paired_ms_ratio_and_stats():
    t = runner.paired_ms(lambda: time.sleep(0.002), lambda: time.sleep(0.004), torch.device("cpu"), reps=6,
                         warmup=1)
    assert t["reps"] == 6 and 1.5 < t["ratio"] < 2.6
    for side in ("a", "b"):
        assert t[side]["min"] <= t[side]["median"] <= t[side]["max"]
    assert t["b"]["median"] > t["a"]["median"]


def test_one_reading_is_one_call_timed_by_timeit():
    """Each reading runs fn exactly once (no hidden warm-up), with garbage collection off as under the
    standard timer; the result is in ms."""
    calls = []
    ms = runner._time_once(lambda: (calls.append(gc.isenabled()), time.sleep(0.003)), torch.device("cpu"))
    assert calls == [False] and 2.9 < ms < 100


def test_kan_linear_rows_cover_both_routes():
    rows = [c for c in all_cases() if c.op == "kan_linear" and c.calls == 1 and "cpu" in c.devices
            and " vs " not in c.label]  # not the optional peers' rows
    labels = {c.label for c in rows}
    assert "b100 1000->1000 G=5 k=3" in labels and "b1024 256->256 G=5 k=3" in labels
    for label in labels:
        assert {c.route for c in rows if c.label == label} == {"gemm", "fused"}
        assert all(c.useful_flops and c.flops and c.info for c in rows if c.label == label)


def test_wavelet_rows_cover_every_wavelet_on_the_cpu():
    from swisk.reference import WAVELETS
    rows = [c for c in all_cases() if c.op == "wavelet_kan" and "cpu" in c.devices and c.calls == 1]
    for size, factor in (("b64 128->128", "2x"), ("b256 512->512", "10x")):
        for w in WAVELETS:
            row = [c for c in rows if c.label == f"{size} {w}"]
            assert len(row) == 1 and f"fwd >= {factor}" in row[0].goal, (size, w)


def test_threads_run_in_their_own_processes(tmp_path):
    path = tmp_path / "b.json"
    out = subprocess.run([sys.executable, "-m", "swisk", "bench", "--quick", "--reps", "1", "--op", "bspline_basis",
                          "--device", "cpu", "--no-progress", "--threads", "1,2", "--json", str(path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    data = json.loads(path.read_text())
    assert sorted({r["threads"] for r in data["rows"]}) == [1, 2] and data["environment"]["threads"] == [1, 2]
    assert all(r["fwdbwd_speedup"] > 0 and r["reps"] == 1 for r in data["rows"])
    bad = subprocess.run([sys.executable, "-m", "swisk", "bench", "--threads", "0"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--threads" in bad.stderr


def test_peer_rows_when_a_peer_is_installed(monkeypatch):
    """Peers are optional: rows appear for an importable package with a KANLayer, none otherwise."""
    import types

    from swisk.bench import peers

    class KANLayer(torch.nn.Module):  # stands in for a peer's layer: a base branch only
        def __init__(self, fin, fout, grid_size, spline_order):
            super().__init__()
            self.lin = torch.nn.Linear(fin, fout)

        def forward(self, x):
            return self.lin(torch.nn.functional.silu(x))

    assert peers._cases("no_such_kan_package") == []
    monkeypatch.setitem(sys.modules, "fake_peer_kan", types.SimpleNamespace(KANLayer=KANLayer, __spec__=object()))
    monkeypatch.setattr(peers.importlib.util, "find_spec", lambda name: object())
    cases = peers._cases("fake_peer_kan")
    assert [c.label for c in cases] == ["b1024 256->256 G=5 k=3 vs fake_peer_kan",
                                        "b4096 1024->1024 G=5 k=3 vs fake_peer_kan"]
    row = runner.measure(cases[0], torch.device("cpu"), torch.float32, reps=1)
    assert row["fwdbwd_speedup"] > 0 and row["reference_fwdbwd_ms"] > 0
    assert row["route_auto"] in ("fused", "gemm")  # which route swisk's side took


def test_goals_are_checked_per_device():
    from swisk.bench.cases import Case
    from swisk.bench.runner import check_goals

    case = Case("op", "x", None, None, None, targets=("fwdbwd_speedup >= 2", "fwdbwd_memory_ratio <= 0.25",
                                                    "cuda: fwdbwd_speedup >= 3"))
    cpu = torch.device("cpu")
    row = check_goals({"fwdbwd_speedup": 2.4, "fwdbwd_memory_ratio": 0.1}, case, cpu)
    assert row["goal_met"] is True and len(row["goal_checks"]) == 2  # the cuda target does not apply
    assert check_goals({"fwdbwd_speedup": 2.4, "fwdbwd_memory_ratio": 0.3}, case, cpu)["goal_met"] is False
    assert check_goals({"fwdbwd_speedup": 2.4}, case, cpu)["goal_met"] is None  # a value is missing
    with pytest.raises(ValueError, match="target 'speed > 2'"):
        check_goals({}, Case("op", "x", None, None, None, targets=("speed > 2",)), cpu)


def test_every_stated_goal_is_checked():
    """A row whose goal is written out also carries it as targets, and every target parses."""
    from swisk.bench import all_cases
    from swisk.bench.runner import check_goals

    for case in all_cases():
        assert bool(case.goal) == bool(case.targets), (case.op, case.label)
        for dev in ("cpu", "cuda", "mps"):
            check_goals({}, case, torch.device(dev))


@pytest.mark.skipif(not runner._linux(), reason="the CPU peak is read from /proc (Linux)")
def test_fwd_bwd_peak_counts_the_gradients_and_working_memory_does_not():
    """Each side's measured step allocates its gradients afresh (the warm-up's are dropped first); the
    working ratio compares what each side spends beyond them. Here the reference's forward also
    allocates a 64 MiB temporary that swisk's side does not."""
    from swisk.bench.cases import Case

    n = 2048  # a 16 MiB weight: its gradient is 16 MiB on both sides

    def setup(device, dtype, gen):
        return {"x": torch.randn(4, n, generator=gen).requires_grad_(),
                "w": torch.randn(n, n, generator=gen).requires_grad_()}

    def wasteful(a):
        t = torch.ones(4 * n, n)  # 64 MiB, touched
        return a["x"] @ a["w"] + t[:4].sum() * 0

    case = Case("op", "x", setup, run=lambda a: a["x"] @ a["w"], reference=wasteful, grads=("x", "w"))
    row = runner.measure_memory({}, case, torch.device("cpu"), torch.float32)
    mib = 2**20
    assert row["grad_bytes"] == (n * n + 4 * n) * 4
    assert 15 * mib < row["swisk_fwdbwd_peak_bytes"] < 24 * mib
    assert 48 * mib < row["reference_fwdbwd_peak_bytes"] < 90 * mib  # RSS-based: pages freed earlier can be reused
    assert row["fwdbwd_working_ratio"] < 0.1 < 0.18 < row["fwdbwd_memory_ratio"] < 0.4


def test_bytes_are_scaled_to_the_rows_dtype():
    """A case's bytes count 4 per element: a bf16 row moves half of them (its GB/s says so)."""
    from swisk.bench.cases import Case

    case = Case("op", "x", lambda device, dtype, gen: {"x": torch.randn(64, 64, generator=gen).to(dtype)},
                run=lambda a: a["x"] * 2, reference=lambda a: a["x"] + a["x"], bytes=4.0 * 2 * 64 * 64)
    for dtype, elem in ((torch.float32, 4), (torch.bfloat16, 2)):
        row = runner.measure(case, torch.device("cpu"), dtype, reps=2)
        assert row["swisk_fwd_gbps"] * row["swisk_fwd_ms"] * 1e6 == pytest.approx(elem * 2 * 64 * 64)


def test_a_failing_case_is_reported_and_the_others_still_run(tmp_path, monkeypatch, capsys):
    """One case that raises becomes a row with its error (exit status 1); the JSON, rewritten after every
    case, holds every row, so a run stopped part-way keeps what it measured."""
    import swisk.bench as bench
    from swisk.bench.cases import Case

    def setup(device, dtype, gen):
        return {"x": torch.randn(32, 32, generator=gen).to(dtype)}

    def broken(a):
        raise RuntimeError("no kernel image for this device\nsecond line")

    good = Case("good_op", "x", setup, run=lambda a: a["x"] * 2, reference=lambda a: a["x"] + a["x"])
    bad = Case("bad_op", "y", setup, run=broken, reference=lambda a: a["x"])
    monkeypatch.setattr(bench, "all_cases", lambda: [bad, good])
    path = tmp_path / "b.json"
    assert bench.main(["--device", "cpu", "--reps", "2", "--no-progress", "--json", str(path)]) == 1
    rows = json.loads(path.read_text())["rows"]
    assert [r["op"] for r in rows] == ["bad_op", "good_op"]
    assert rows[0]["error"] == "RuntimeError: no kernel image for this device"
    assert rows[1]["swisk_fwd_ms"] > 0 and "error" not in rows[1]
    assert "1 case(s) failed" in capsys.readouterr().out


def test_tf32_rows_run_both_sides_with_tf32_and_restore_the_flag():
    """A tf32 case measures swisk and its reference with allow_tf32 set (restored after, also when a
    side raises), its row says so, and the ceilings then have a tf32 matmul of their own."""
    from swisk.bench.cases import Case

    seen = []

    def side(a):
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return a["x"] * 2

    case = Case("op", "x tf32", lambda device, dtype, gen: {"x": torch.randn(8, 8, generator=gen)},
                run=side, reference=side, tf32=True)
    before = torch.backends.cuda.matmul.allow_tf32
    row = runner.measure(case, torch.device("cpu"), torch.float32, reps=2)
    assert row["tf32"] is True and seen and all(seen)
    assert torch.backends.cuda.matmul.allow_tf32 == before
    with pytest.raises(ZeroDivisionError), runner.tf32_matmuls(True):
        1 / 0
    assert torch.backends.cuda.matmul.allow_tf32 == before
    plain = runner.measure(Case("op", "x", case.setup, run=side, reference=side), torch.device("cpu"), torch.float32, 2)
    assert "tf32" not in plain
    assert set(runner.device_ceilings(torch.device("cpu"), [torch.float32], 2, tf32=True)["matmul_tflops"]) == {
        "float32", "tf32"}


def test_around_holds_the_swisk_sides_whole_step():
    """A case's around() context holds swisk's forward and its backward (settings the backward reads, such
    as kan_conv's workspace), in the timings and the memory steps; the reference runs outside it."""
    import contextlib

    from swisk.bench.cases import Case

    inside, seen = [False], []

    @contextlib.contextmanager
    def around():
        inside[0] = True
        try:
            yield
        finally:
            inside[0] = False

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, side):
            seen.append((side, "fwd", inside[0]))
            ctx.side = side
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append((ctx.side, "bwd", inside[0]))
            return g * 2, None

    case = Case("op", "x", lambda device, dtype, gen: {"x": torch.randn(8, generator=gen).requires_grad_()},
                run=lambda a: Probe.apply(a["x"], "swisk"), reference=lambda a: Probe.apply(a["x"], "ref"),
                grads=("x",), around=around)
    row = runner.measure(case, torch.device("cpu"), torch.float32, reps=2)
    runner.measure_memory(row, case, torch.device("cpu"), torch.float32)
    assert {(s, p) for s, p, _ in seen} == {("swisk", "fwd"), ("swisk", "bwd"), ("ref", "fwd"), ("ref", "bwd")}
    assert all(held == (side == "swisk") for side, _, held in seen)
    from swisk.bench import conv
    for c in conv.CASES:
        assert (c.around is not None) == ("workspace" in c.label or "separate" in c.label)
