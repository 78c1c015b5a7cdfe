"""The package as a whole: build info, backends, CLI, benchmark, CI command, the Metal glue."""
import json
import pathlib
import re
import subprocess
import sys
from importlib import resources

import pytest
import torch

import swisk
from swisk import _backend, _C

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_build_info_and_backends():
    info = swisk.build_info()
    for key in ("version", "cuda_compiled", "cuda_archs", "metal_compiled", "metal_source", "openmp"):
        assert key in info
    assert info["metal_source"] is True
    b = swisk.backends()
    assert set(b) == {"cpu", "cuda", "mps"} and b["cpu"] is True
    assert b["cuda"] == (info["cuda_compiled"] and torch.cuda.is_available())
    want = "cuda" if b["cuda"] else "mps" if b["mps"] else "cpu"
    assert swisk.default_device().type == want


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```\n(pip install [^\n]+)\n```", readme)
    assert len(blocks) == 2, "the README has exactly two set-up commands"
    assert "python -m swisk bench" in blocks[0]
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[1] in ci.splitlines()


def test_cli_info():
    out = subprocess.run([sys.executable, "-m", "swisk", "info"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "backends" in out.stdout and "bspline_basis" in out.stdout


def test_cli_bench_json(tmp_path):
    path = tmp_path / "bench.json"
    out = subprocess.run([sys.executable, "-m", "swisk", "bench", "--quick", "--reps", "1", "--op", "bspline_basis",
                          "--device", "cpu", "--no-progress", "--json", str(path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    data = json.loads(path.read_text())
    assert data["environment"]["device"] == "cpu" and data["environment"]["torch"] == torch.__version__
    row = data["rows"][0]
    assert row["op"] == "bspline_basis" and row["swisk_fwd_ms"] > 0 and row["fwdbwd_speedup"] > 0
    assert "speedup" in out.stdout


def test_msl_source_is_shipped_and_self_contained():
    src = resources.files("swisk").joinpath("swisk_kernels.metal").read_text()
    assert '#include "swisk/kernels/bspline.h"' not in src  # inlined
    for name in ("swisk_bspline_basis_", "swisk_bspline_basis_backward_"):
        assert f'SWISK_HOST_NAME("{name}" #S)' in src


def test_metal_plan_glue_runs_on_the_emulator(monkeypatch, rng):
    """The MPS path (plan from the core, buffers and parameter bytes bound by Python) on the emulator."""

    class FakeLibrary:
        def __getattr__(self, kernel):
            def launch(*args, threads, group_size):
                grid = [t // g for t, g in zip(threads, group_size)]
                assert all(t % g == 0 for t, g in zip(threads, group_size))
                params = bytes(args[-1].cpu().numpy().tobytes())
                _C.metal_emu_run(kernel, grid, list(group_size), params, [_backend.view("t", "b", a) for a in args[:-1]])
            return launch

    monkeypatch.setattr(_backend, "metal_library", lambda: FakeLibrary())
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: self)  # keep the parameter bytes on the CPU
    grid = torch.linspace(-2.2, 2.2, 12).expand(5, -1).contiguous()
    x = torch.randn(9, 5, generator=rng)
    out = torch.empty(9, 5, 8)

    def mps(t):  # the view of t as if it lived on the MPS device
        v = _backend.view("t", "x", t)
        return v[:4] + (2, 0)

    plan = _C.bspline_basis(mps(x), mps(grid), mps(out), 3, "mps", 0)
    assert plan["kernel"] == "swisk_bspline_basis_f32" and plan["buffers"] == [0, 1, 2]
    _backend.run_metal_plan(plan, [x, grid, out])
    torch.testing.assert_close(out, swisk.reference.bspline_basis(x, grid, 3), atol=1e-6, rtol=0)


def _clang():
    import shutil

    for name in ["clang++"] + [f"clang++-{v}" for v in range(20, 13, -1)]:
        if shutil.which(name):
            return name
    return None


def _syntax_check(source: str, tmp_path):
    path = tmp_path / "kernels.metal"
    path.write_text(source)
    cmd = [_clang(), "-std=c++20", "-fsyntax-only", "-Wno-unknown-attributes", "-DSWISK_METAL_ADDRESS_SPACES",
           f"-I{ROOT / 'cpp' / 'include'}", f"-I{ROOT / 'cpp' / 'src'}", "-include", "emu/metal_shim.h", "-x", "c++",
           str(path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(_clang() is None, reason="needs clang++ (apt-get install clang)")
def test_msl_address_spaces(tmp_path):
    """The emitted MSL compiled by clang with Metal's address spaces: a pointer that loses its
    device/threadgroup/constant qualifier fails here as it would with the Metal compiler."""
    src = resources.files("swisk").joinpath("swisk_kernels.metal").read_text()
    ok = _syntax_check(src, tmp_path)
    assert ok.returncode == 0, ok.stderr[-3000:]
    broken = src.replace("SWISK_GLOBAL T* out) {", "T* out) {", 1)
    assert broken != src
    bad = _syntax_check(broken, tmp_path)
    assert bad.returncode != 0 and "no matching function" in bad.stderr


def _pytest_in(tmp_path, files: dict, env=None):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    import os

    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, **(env or {})})


def test_a_leaked_torch_flag_fails_the_test(tmp_path):
    """The suite's guard: a test that flips a global torch switch without restoring it fails (and the
    switch is restored for the next test), whatever the pytest version."""
    leak = ("import torch\n\ndef test_leaks():\n    torch.backends.cuda.matmul.allow_tf32 = True\n\n"
            "def test_after():\n    assert torch.backends.cuda.matmul.allow_tf32 is False\n")
    r = _pytest_in(tmp_path, {"conftest.py": (ROOT / "tests" / "conftest.py").read_text(), "test_leak.py": leak})
    assert r.returncode != 0 and "leaked global torch state" in r.stdout, r.stdout[-2000:]
    assert "2 passed, 1 error" in r.stdout, r.stdout[-2000:]


def test_cpp_tests_skip_when_not_built(tmp_path):
    """tests/test_cpp.py skips with the reason when the C++ test binary is absent."""
    src = (ROOT / "tests" / "test_cpp.py").read_text()
    r = _pytest_in(tmp_path, {"test_cpp_copy.py": src}, env={"SWISK_CPP_TESTS": str(tmp_path / "absent")})
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout[-2000:]
