"""The package as a whole: build info, backends, CLI, benchmark, CI command, the Metal glue."""
import json
import pathlib
import re
import shutil
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


def test_version_is_written_once():
    """pyproject.toml holds the version; CMake reads it from there and the core reports it."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    assert swisk.__version__ == version == swisk.build_info()["version"]
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert version not in cmake and "SWISK_PYPROJECT_VERSION" in cmake
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_wheel_settings():
    """One stable-ABI module for CPython 3.12+ (per-version below), bounded build tools, and the release
    script's repair that must end in a manylinux tag."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'wheel.py-api = "cp312"' in pyproject
    for tool in ("scikit-build-core", "nanobind"):
        assert re.search(rf'"{tool}>=[0-9.]+,<[0-9.]+"', pyproject), tool
    assert re.search(r'cmake.version = ">=[0-9.]+,<[0-9.]+"', pyproject)
    assert "STABLE_ABI" in (ROOT / "CMakeLists.txt").read_text()
    assert '[[ "$tag" == manylinux* ]]' in (ROOT / "scripts" / "build_wheels.sh").read_text()
    name = pathlib.Path(_C.__file__).name
    if sys.platform == "linux":
        tag = ".abi3.so" if sys.version_info >= (3, 12) else f".cpython-{sys.version_info[0]}{sys.version_info[1]}-"
        assert tag in name, name


@pytest.mark.skipif(sys.platform != "linux" or shutil.which("readelf") is None, reason="ELF and readelf")
def test_module_links_no_openmp_and_shares_torchs_threads():
    """No OpenMP library among the module's dependencies (auditwheel keeps manylinux without bundling
    one); the CPU loops run on the runtime torch loaded, so torch.set_num_threads sets their count."""
    needed = subprocess.run(["readelf", "-d", _C.__file__], capture_output=True, text=True, check=True).stdout
    assert "NEEDED" in needed and "omp" not in needed, needed
    assert swisk.build_info()["openmp"] == "libgomp.so.1"
    code = ("import torch, swisk\nfrom swisk import _C\n"
            "for n in (1, 3, 2):\n    torch.set_num_threads(n)\n    assert _C.cpu_threads() == n, (n, _C.cpu_threads())\n")
    subprocess.run([sys.executable, "-c", code], check=True, stdin=subprocess.DEVNULL, timeout=120)


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
    for name in ("swisk_bspline_expand_m", "swisk_bspline_contract_m"):
        assert f'SWISK_HOST_NAME("{name}" #M "_" #S)' in src


class _EmulatedMetalLibrary:
    """Stands in for torch.mps.compile_shader's library: each kernel runs on the emulator with the
    buffers and parameter bytes exactly as the MPS binder passed them."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, kernel):
        def launch(*args, threads, group_size):
            assert all(t % g == 0 for t, g in zip(threads, group_size))
            grid = [t // g for t, g in zip(threads, group_size)]
            params = bytes(args[-1].cpu().numpy().tobytes())
            self.calls.append(kernel)
            _C.metal_emu_run(kernel, grid, list(group_size), params,
                             [(a.data_ptr(), a.numel() * a.element_size()) for a in args[:-1]])
        return launch


def _as_mps(t):
    """The core's view of a CPU tensor as if it lived on the MPS device."""
    return None if t is None else _backend.view("t", "x", t, False)[:4] + (2, 0)


def _metal_cases(rng):
    grid = torch.linspace(-2.2, 2.2, 12).expand(5, -1).contiguous()
    x, gy = torch.randn(9, 5, generator=rng), torch.randn(9, 3, generator=rng)
    bw, sw, sc = torch.randn(3, 5, generator=rng), torch.randn(3, 5, 8, generator=rng), torch.randn(3, 5, generator=rng)
    s, t = torch.rand(3, 5, generator=rng) + 0.5, torch.randn(3, 5, generator=rng)
    from swisk._ops import sketch, spline, wavelet

    return [
        (spline.BASIS, [x, grid], (3, 1)),
        (spline.EXPAND, [x, grid], (3, 0, True)),
        (spline.EXPAND, [x, grid], (9, 2, False)),
        (spline.CONTRACT, [x, grid, torch.randn(9, 5 + 5 * 8, generator=rng)], (3, 1, True)),
        (spline.CONTRACT, [x, grid, torch.randn(9, 5 * 5, generator=rng)], (6, 2, False)),
        (spline.KAN_LINEAR, [x, grid, bw, sw, sc], (3, False, False)),
        (spline.KAN_LINEAR, [x, grid, None, sw, None], (3, False, False)),
        (spline.KAN_LINEAR_BACKWARD, [x, grid, bw, sw, sc, gy], (3, True, True, False)),
        (spline.KAN_LINEAR_BACKWARD, [x, grid, None, sw, None, gy], (3, True, True, False)),
        (spline.KAN_LINEAR_BACKWARD, [x, grid, bw, sw, sc, gy], (3, False, True, False)),  # no grad_x
        (spline.KAN_LINEAR_BACKWARD, [x, grid, bw, sw, sc, gy], (3, True, False, False)),  # frozen weights
        (wavelet.WAVELET_KAN, [x, s, t, bw], ("morlet",)),
        (wavelet.WAVELET_KAN_BACKWARD, [x, s, t, bw, gy], ("meyer",)),
        (sketch.SKETCH_MATRIX, [torch.empty(0)], ("gaussian", 7, 300, 5, 1, 6, 2, 290, 3, 0, 0, 0)),
        (sketch.SKETCH_MATRIX, [torch.empty(0)], ("sparse_sign", 7, 300, 5, 1, 6, 2, 290, 3, 0, 0, 0)),
        (sketch.SKETCH_MATRIX, [torch.empty(0)], ("rademacher", 7, 300, 5, 1, 6, 2, 290, 3, 3, 1, 2)),  # 3 terms
        (sketch.FWHT, [torch.randn(3, 2**19, generator=rng)], (0.5,)),  # Metal: the chunk pass, then two register passes
        (sketch.SRHT, [torch.randn(3, 5000, generator=rng)], (40, 9)),  # in, FWHT passes on the workspace, out
        (sketch.SRHT_TRANSPOSE, [torch.randn(3, 40, generator=rng)], (5000, 9)),
    ]


def test_metal_glue_binds_the_right_tensors(monkeypatch, rng):
    """Every op's MPS path (dispatches and buffer slots decided in C++, bound by the Python binder)
    run on the emulator: outputs equal the CPU backend's, inputs are left untouched. (The kan_linear
    backward once bound its gradients' slots to the parameters and wrote past spline_scaler.)"""
    lib = _EmulatedMetalLibrary()
    monkeypatch.setattr(_backend, "metal_library", lambda: lib)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: self)  # parameter bytes stay on the CPU
    for spec, inputs, scalars in _metal_cases(rng):
        before = [None if t is None else t.clone() for t in inputs]
        call = spec.prepare(*map(_as_mps, inputs), *scalars, "mps")
        outs = [torch.zeros(shape) if zero else torch.full(shape, float("nan"))  # zero-filled as _run does
                for shape, zero in zip(call.outputs, call.zero_outputs)]
        work = [torch.full((call.work,), float("nan"))] if call.has_work else []
        tensors = inputs + outs + work
        dispatches = call.launch([0 if t is None else t.data_ptr() for t in tensors], 0)
        assert dispatches, spec.name
        _backend.run_metal_dispatches(dispatches, tensors, "mps")
        cpu = spec.prepare(*(None if t is None else _backend.view("t", "x", t, False) for t in inputs), *scalars,
                           "cpu")
        want = [torch.zeros(shape) for shape in cpu.outputs]
        cwork = [torch.empty(cpu.work, dtype=torch.float32)] if cpu.has_work else []
        cpu.launch([0 if t is None else t.data_ptr() for t in inputs + want + cwork], 0)
        for name, got, ref in zip(spec.outputs, outs, want):
            if ref.numel():  # an absent input's gradient is empty
                # a wrong binding gives garbage; the backends' fp32 math differs by rounding, which meyer's
                # derivative (|grad_x| up to ~20) carries past 2e-5 absolute: over 300 seeds the gap stayed
                # below 1e-5 of the output's largest entry, so the bound is 1e-4 of it
                scale = max(1.0, ref.abs().max().item())
                torch.testing.assert_close(got, ref, atol=1e-4 * scale, rtol=1e-4, msg=f"{spec.name}.{name}")
        for a, b in zip(inputs, before):
            assert (a is None and b is None) or torch.equal(a, b), f"{spec.name} wrote into an input"
    assert any(k.startswith("swisk_kan_backward_scale") for k in lib.calls)


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


def test_metal_emu_guards_every_bound_buffer(rng):
    """metal-emu places each bound buffer between sentinels: a kernel writing past what the binder
    declared for a buffer raises instead of corrupting memory (here the output is declared too short)."""
    from swisk._ops import spline

    x, grid = torch.randn(9, 5, generator=rng), torch.linspace(-2.2, 2.2, 12).expand(5, -1).contiguous()
    call = spline.BASIS.prepare(*(_backend.view("t", "x", t, False) for t in (x, grid)), 3, 0, "metal-emu")
    out = torch.empty(call.outputs[0])
    (kernel, g, tg, params, slots), = call.launch([x.data_ptr(), grid.data_ptr(), out.data_ptr()], 0)
    sizes = [t.numel() * 4 for t in (x, grid, out)]
    _C.metal_emu_run(kernel, list(g), list(tg), params, [(t.data_ptr(), sizes[i]) for i, t in
                                                          zip(slots, (x, grid, out))])
    short = [(t.data_ptr(), sizes[i] // (2 if i == 2 else 1)) for i, t in zip(slots, (x, grid, out))]
    with pytest.raises(RuntimeError, match="write out of bounds after"):
        _C.metal_emu_run(kernel, list(g), list(tg), params, short)


def test_compile_caches_are_keyed_on_the_op_schemas(monkeypatch):
    """torch.compile's on-disk caches name an op in a graph's key but not its schema: swisk puts a hash of
    its schemas in torch.compiler.config.cache_key_tag, so a graph compiled against an older swisk's
    schemas recompiles instead of calling an op with the old arguments. The user's own tag stays."""
    from swisk._ops import define

    cfg = getattr(torch.compiler, "config", None)
    if cfg is None or not hasattr(cfg, "cache_key_tag"):
        pytest.skip(f"torch {torch.__version__} has no compile cache key tag")
    assert re.search(r"(^| )swisk-[0-9a-f]{16}( |$)", cfg.cache_key_tag)
    with cfg.patch(cache_key_tag="mine"):
        define.tag_compile_caches()
        now = cfg.cache_key_tag
        define.tag_compile_caches()  # idempotent
        assert now == cfg.cache_key_tag and now.startswith("mine swisk-")
    monkeypatch.setattr(define, "SCHEMAS", define.SCHEMAS + ["kan_linear_backward(Tensor x) -> Tensor"])
    with cfg.patch(cache_key_tag="mine"):
        define.tag_compile_caches()
        assert cfg.cache_key_tag != now  # another schema, another key
