"""python -m swisk: --version, info --json, and the bench's argument errors as one line before any run."""
import json
import subprocess
import sys

import pytest
import torch

import swisk
from swisk.__main__ import main
from swisk.bench import _fmt_ratio


def run_main(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def bench_error(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        main(["bench", *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_version(capsys):
    code, out, _ = run_main(capsys, "--version")
    assert code == 0 and out.strip() == f"swisk {swisk.__version__} (torch {torch.__version__})"


def test_info_json(capsys):
    code, out, _ = run_main(capsys, "info", "--json")
    d = json.loads(out)
    assert code == 0 and d["swisk"] == swisk.__version__ and d["torch"] == torch.__version__
    assert d["backends"] == swisk.backends() and "kan_linear" in d["ops"] and d["devices"]["cpu"]["threads"] >= 1
    code, text, _ = run_main(capsys, "info")
    assert code == 0 and text.startswith(f"swisk {swisk.__version__}")


def test_no_command(capsys):
    with pytest.raises(SystemExit):
        main([])
    assert "a command is needed" in capsys.readouterr().err


def test_bench_argument_errors(capsys, tmp_path):
    assert bench_error(capsys, "--reps", "0").endswith("--reps: expected a positive number of repetitions, got 0")
    line = bench_error(capsys, "--op", "kan_lineer")
    assert "--op: unknown op 'kan_lineer'; valid: " in line and "kan_linear" in line and "fwht" in line
    assert "expected cpu, cuda or mps, got 'tpu'" in bench_error(capsys, "--device", "tpu")
    if not torch.cuda.is_available():
        assert "--device cuda: no CUDA device is available here" in bench_error(capsys, "--device", "cuda")
    if not torch.backends.mps.is_available():
        assert "--device mps: no MPS device is available here" in bench_error(capsys, "--device", "mps")
    path = tmp_path / "no" / "such" / "dir" / "out.json"
    assert f"--json: cannot write '{path}'" in bench_error(capsys, "--json", str(path))
    assert not (tmp_path / "no").exists()


def test_memory_ratio_format():
    assert _fmt_ratio(1 / 410) == "1/410" and _fmt_ratio(0.6) == "1/1.67"
    assert _fmt_ratio(2.5) == "2.50x" and _fmt_ratio(None) == "-"


def _closed_pipe_run(args):
    """Runs a command whose stdout is a pipe nobody reads (its read end closed first): every write fails."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, *args], stdout=w, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(w)
    return p.stderr


def test_no_broken_pipe_traceback():
    """python -m swisk info | (a reader that went away): no BrokenPipeError traceback, while main() run
    without the guard does print one (so the check can fail)."""
    err = _closed_pipe_run(["-m", "swisk", "info"])
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    bare = _closed_pipe_run(["-c", "import sys; from swisk.__main__ import main; sys.exit(main(['info']))"])
    assert "BrokenPipeError" in bare


def test_bench_quick_writes_json_and_plot(tmp_path):
    """The release check: python -m swisk bench --quick --plot out.png --json out.json (every quick row;
    about 17 s on 2 CPU threads)."""
    pytest.importorskip("matplotlib")
    png, js = tmp_path / "out.png", tmp_path / "out.json"
    r = subprocess.run([sys.executable, "-m", "swisk", "bench", "--quick", "--no-progress", "--plot", str(png),
                        "--json", str(js)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    rows = json.loads(js.read_text())["rows"]
    assert len(rows) >= 10 and all(r["reps"] >= 1 and len(r["swisk_fwd_ms_min_max"]) == 2 for r in rows)


def test_plot_needs_matplotlib(capsys, monkeypatch):
    import swisk.bench.plot as plot

    monkeypatch.setattr(plot, "available", lambda: False)
    assert "--plot: needs matplotlib" in bench_error(capsys, "--plot", "x.png")


def test_bench_records_the_builds_commit(tmp_path, monkeypatch):
    """The environment's commit is the one the build recorded, never the repository the bench runs in."""
    from swisk.bench import runner

    env = runner.environment(torch.device("cpu"))
    assert env["commit"] == (swisk.build_info().get("commit") or "unknown (built without git metadata)")
    built = dict(runner._C.build_info())
    monkeypatch.setattr(runner._C, "build_info", lambda: {**built, "commit": ""})
    monkeypatch.chdir(tmp_path)
    assert runner.environment(torch.device("cpu"))["commit"] == "unknown (built without git metadata)"


def test_bench_environment_names_the_cpu_family(monkeypatch, tmp_path):
    """A VM's CPU name often hides its generation: the bench records family and model beside it, read
    from the first processor's block of /proc/cpuinfo."""
    from swisk.bench import runner

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
                    "model name\t: AMD EPYC\n\nprocessor\t: 1\ncpu family\t: 99\nmodel\t\t: 9\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: real_open(info if p == "/proc/cpuinfo" else p, *a, **k))
    assert runner._cpu_name() == "AMD EPYC (family 26, model 2)"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU\n")
    assert runner._cpu_name() == "Some CPU"
