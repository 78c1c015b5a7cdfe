"""python -m swisk bench: every op against its swisk.reference formulation (time, peak memory)."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

import torch

from . import plot

# One module per op family, each with a CASES list (see cases.Case).
FAMILIES = ["spline", "wavelet", "conv", "sketch", "sketched", "overhead", "peers"]


def all_cases() -> list:
    out = []
    for fam in FAMILIES:
        out.extend(importlib.import_module(f"{__name__}.{fam}").CASES)
    return out


def _fmt_ms(v):
    return "-" if v is None else f"{v:9.3f}"


def _fmt_mb(v):
    return "-" if v is None else f"{v / 2**20:8.1f}"


def _fmt_x(v):
    return "-" if v is None else f"{v:6.2f}x"


def _fmt_ratio(v):
    """A memory ratio: "2.31x" from 1 up, "1/410" below (0.0024 would print as 0.00x)."""
    if v is None:
        return "-"
    if v >= 1 or v <= 0:
        return f"{v:.2f}x"
    return f"1/{1 / v:.0f}" if v < 0.5 else f"1/{1 / v:.2f}"


def _error_text(e: Exception) -> str:
    """A failed case's error for its row: the exception's type and first line."""
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _failed(rows: list) -> int:
    """How many rows hold an error (said once, under the table)."""
    n = sum(bool(r.get("error")) for r in rows)
    if n:
        print(f"{n} case(s) failed: see their rows")
    return n


def table(rows: list) -> str:
    head = (f"{'op':<16} {'case':<26} {'dtype':<8} {'fwd ms':>9} {'ref':>9} {'speedup':>8} "
            f"{'f+b ms':>9} {'ref':>9} {'speedup':>8} {'peak MB':>8} {'ref MB':>8} {'mem':>7} {'work':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['op']:<16} {r['case']:<26} {r['dtype']:<8} {_fmt_ms(r.get('swisk_fwd_ms'))} "
            f"{_fmt_ms(r.get('reference_fwd_ms'))} {_fmt_x(r.get('fwd_speedup')):>8} "
            f"{_fmt_ms(r.get('swisk_fwdbwd_ms'))} {_fmt_ms(r.get('reference_fwdbwd_ms'))} "
            f"{_fmt_x(r.get('fwdbwd_speedup')):>8} {_fmt_mb(r.get('swisk_fwdbwd_peak_bytes'))} "
            f"{_fmt_mb(r.get('reference_fwdbwd_peak_bytes'))} {_fmt_ratio(r.get('fwdbwd_memory_ratio')):>7} "
            f"{_fmt_ratio(r.get('fwdbwd_working_ratio')):>7}")
        extra = [f"{k}={r[k]}" for k in ("route", "route_auto", "threads") if r.get(k)]
        extra += [f"{k}={r[k]:.3g}" for k in ("swisk_fwd_tflops", "swisk_fwdbwd_tflops", "swisk_fwdbwd_useful_tflops",
                                              "fwdbwd_matmul_fraction", "swisk_fwd_gbps", "swisk_fwd_gevals_per_s",
                                              "swisk_fwd_us_per_call", "swisk_fwdbwd_us_per_call") if r.get(k)]
        extra += [f"{k}={r[k]}" for k in ("swisk_params", "reference_params", "swisk_stored", "reference_stored")
                  if r.get(k)]
        extra += [f"{k}={r[k]}" for k in ("swisk_error", "reference_error", "error") if r.get(k)]
        if r.get("goal"):
            met = {True: " [met]", False: " [missed]"}.get(r.get("goal_met"), "")
            extra.append(f"goal: {r['goal']}{met}")
        if extra:
            lines.append(" " * 4 + "  ".join(extra))
    return "\n".join(lines)


def _per_thread_count(p, args, argv) -> int:
    """Runs the bench once per thread count in a fresh process and merges the rows."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    try:
        counts = [int(t) for t in args.threads.split(",")]
    except ValueError:
        p.error(f"--threads: expected comma-separated positive integers, got {args.threads!r}")
    if not counts or min(counts) < 1:
        p.error(f"--threads: expected comma-separated positive integers, got {args.threads!r}")
    rest, skip = [], False
    for a in (sys.argv[1:] if argv is None else list(argv)):
        if skip:
            skip = False
        elif a in ("--threads", "--json", "--plot"):
            skip = True
        elif not a.startswith(("--threads=", "--json=", "--plot=")):
            rest.append(a)
    rows, env, ceilings = [], None, {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            path = os.path.join(tmp, f"t{n}.json")
            cmd = [sys.executable, "-c", "import sys, torch; torch.set_num_threads(int(sys.argv[1])); "
                   "from swisk.bench import main; sys.exit(main(sys.argv[2:]))", str(n), *rest, "--json", path]
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
            if r.returncode and not os.path.exists(path):  # a failed case still writes its rows
                return r.returncode
            with open(path) as f:
                data = json.load(f)
            rows += data["rows"]
            env = env or data["environment"]
            ceilings[str(n)] = data["ceilings"]
    env["threads"] = counts
    print(f"swisk {env['swisk']} bench on {env['device_name']} ({env['device']}, threads {counts}), "
          f"torch {env['torch']}")
    print(table(rows))
    failed = _failed(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "ceilings": ceilings, "rows": rows}, f, indent=2)
        print(f"wrote {args.json}")
    if args.plot:
        plot.plot(rows, args.plot, f"swisk {env['swisk']} on {env['device_name']}, threads {counts}")
        print(f"wrote {args.plot}")
    return 1 if failed else 0


def _check_args(p, args) -> None:
    """Every argument error before anything runs, as one line (argparse's error: usage, message, exit 2)."""
    if args.reps is not None and args.reps < 1:
        p.error(f"--reps: expected a positive number of repetitions, got {args.reps}")
    if args.op:
        known = sorted({c.op for c in all_cases()})
        bad = [o for o in args.op if o not in known]
        if bad:
            p.error(f"--op: unknown op {', '.join(map(repr, bad))}; valid: {', '.join(known)}")
    if args.device:
        try:
            dev = torch.device(args.device)
        except RuntimeError:
            p.error(f"--device: expected cpu, cuda or mps, got {args.device!r}")
        if dev.type not in ("cpu", "cuda", "mps"):
            p.error(f"--device: expected cpu, cuda or mps, got {args.device!r}")
        if dev.type == "cuda" and not torch.cuda.is_available():
            p.error("--device cuda: no CUDA device is available here (torch.cuda.is_available() is False)")
        if dev.type == "mps" and not torch.backends.mps.is_available():
            p.error("--device mps: no MPS device is available here (torch.backends.mps.is_available() is False)")
    if args.plot and not plot.available():
        p.error('--plot: needs matplotlib (pip install "swisk[plot]")')
    for opt, path in (("--json", args.json), ("--plot", args.plot)):
        if not path:
            continue
        try:  # an unwritable path fails now, not after the run
            existed = os.path.exists(path)
            with open(path, "a"):
                pass
            if not existed:
                os.remove(path)
        except OSError as e:
            p.error(f"{opt}: cannot write {path!r}: {e.strerror}")


def main(argv=None) -> int:
    from .. import default_device
    from . import runner

    p = argparse.ArgumentParser(prog="python -m swisk bench", description=__doc__)
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    p.add_argument("--op", action="append", help="only this op (repeatable)")
    p.add_argument("--quick", action="store_true", help="small cases and few repetitions")
    p.add_argument("--reps", type=int, default=None, help="timed repetitions per measurement")
    p.add_argument("--json", metavar="FILE", help="write the results (with device, versions, commit) as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="draw speed-up and memory per row (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--threads", metavar="N[,M...]", help="CPU thread counts, each run in its own process "
                   "(changing torch's thread count inside one process slows its later parallel regions)")
    args = p.parse_args(argv)
    _check_args(p, args)
    if args.threads:
        return _per_thread_count(p, args, argv)

    device = torch.device(args.device) if args.device else default_device()
    reps = args.reps or (3 if args.quick else 10)
    cases = [c for c in all_cases() if device.type in c.devices and (not args.op or c.op in args.op)
             and (c.quick or not args.quick)]
    if not cases:
        p.error(f"no benchmark case for op {args.op} on {device.type}")
    tasks = [(c, dt) for c in cases for dt in c.dtypes.get(device.type, (torch.float32,))]

    env = runner.environment(device)
    print(f"swisk {env['swisk']} bench on {env['device_name']} ({device}, {env['threads']} threads), "
          f"torch {env['torch']}")
    try:  # tqdm is optional (pip install "swisk[progress]"); without it, one line per case on stderr
        from tqdm import tqdm
        bar = tqdm(tasks, disable=args.no_progress, unit="case")
    except ImportError:
        bar = tasks
    rows = []
    for i, (case, dt) in enumerate(bar):  # times first, then (below) peak memory, which changes the CPU allocator
        what = f"{case.op} {case.label} {str(dt)[6:]}"
        if hasattr(bar, "set_description"):
            bar.set_description(what)
        elif not args.no_progress:
            print(f"[{i + 1}/{len(tasks)}] {what}", file=sys.stderr, flush=True)
        try:
            rows.append(runner.measure(case, device, dt, reps))
        except Exception as e:  # one broken case is reported in its row; the others still run
            rows.append({"op": case.op, "case": case.label, "dtype": str(dt)[6:], "goal": case.goal,
                         "threads": torch.get_num_threads(),
                         "error": _error_text(e)})
        if args.json:  # rows so far: a run stopped part-way keeps what it measured
            runner.to_json(args.json, env, {}, rows)
    ceilings = runner.device_ceilings(device, sorted({dt for _, dt in tasks}, key=str), reps,
                                      tf32=device.type == "cuda" and any(c.tf32 for c, _ in tasks))
    for row, (case, dt) in zip(rows, tasks):
        if row.get("error"):
            continue
        try:
            runner.measure_memory(row, case, device, dt)
        except Exception as e:
            row["error"] = "memory: " + _error_text(e)
        runner.check_goals(row, case, device)
        peak = ceilings["matmul_tflops"].get("tf32" if row.get("tf32") else row["dtype"])
        if peak and row.get("swisk_fwdbwd_tflops"):
            row["fwdbwd_matmul_fraction"] = row["swisk_fwdbwd_tflops"] / peak
    print()
    print(table(rows))
    failed = _failed(rows)
    print(f"device ceilings: matmul TFLOP/s {({k: round(v, 2) for k, v in ceilings['matmul_tflops'].items()})}, "
          f"copy {ceilings['copy_gbps']:.1f} GB/s")
    if args.json:
        runner.to_json(args.json, env, ceilings, rows)
        print(f"wrote {args.json}")
    if args.plot:
        plot.plot(rows, args.plot, f"swisk {env['swisk']} on {env['device_name']} ({device}, {env['threads']} threads)")
        print(f"wrote {args.plot}")
    return 1 if failed else 0
