"""Times every benchmark case against its reference formulation: medians, peak memory, ratios."""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import platform
import statistics
import sys
import time
import timeit

import torch

from .. import _C
from .cases import Case

# ---- memory -------------------------------------------------------------------------------------


def _linux() -> bool:
    return sys.platform.startswith("linux") and os.path.exists("/proc/self/clear_refs")


def _return_freed_memory() -> None:
    """Make glibc hand freed blocks back to the OS, so RSS peaks measure live memory (for good: later
    large allocations are mmap'd afresh, so time nothing after this)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD: large blocks are mmap'd and unmapped on free
        libc.mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD
        libc.malloc_trim(0)
    except OSError:
        pass


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class PeakMemory:
    """Peak bytes allocated above the starting point while the block runs (None where unknown)."""

    def __init__(self, device: torch.device):
        self.device, self.peak = device, None

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        elif self.device.type == "cpu" and _linux():
            _return_freed_memory()
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM (the peak resident set) to the current RSS
            self.base = _status_kb("VmRSS") * 1024
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device) - self.base
        elif self.device.type == "cpu" and _linux():
            self.peak = max(0, _status_kb("VmHWM") * 1024 - self.base)


# ---- time ---------------------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _clock(device: torch.device):
    """perf_counter read once the device has finished its queued work (torch.utils.benchmark's
    default timer, for the device timed here only)."""
    def clock() -> float:
        _sync(device)
        return time.perf_counter()
    return clock


def _time_once(fn, device: torch.device) -> float:
    """One call of fn in ms, timed by the standard library's timeit (the timer torch.utils.benchmark
    builds on: garbage collection off while it runs) on a device-synchronised clock. A single call per
    reading, not Timer.timeit, which adds two warm-up calls to every reading and so would break the
    interleaving of paired_ms."""
    return timeit.Timer(fn, timer=_clock(device)).timeit(1) * 1e3


def median_ms(fn, device: torch.device, reps: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    _sync(device)
    return statistics.median(_time_once(fn, device) for _ in range(reps))


def paired_ms(a, b, device: torch.device, reps: int, warmup: int = 2) -> dict:
    """a and b timed as interleaved pairs (which goes first alternates): per side the repetitions'
    min / median / max, and the median of the per-pair ratios b / a (robust to a machine whose speed
    drifts during the run, which skews ratios of separately taken medians)."""
    for _ in range(warmup):
        a(), b()
    _sync(device)
    ta, tb = [], []
    for i in range(reps):
        if i % 2:
            tb.append(_time_once(b, device))
            ta.append(_time_once(a, device))
        else:
            ta.append(_time_once(a, device))
            tb.append(_time_once(b, device))
    stats = lambda t: {"min": min(t), "median": statistics.median(t), "max": max(t)}  # noqa: E731
    return {"a": stats(ta), "b": stats(tb), "ratio": statistics.median(y / x for x, y in zip(ta, tb)),
            "reps": reps}


# ---- one case -----------------------------------------------------------------------------------


def _fwd_bwd(fn, inputs: dict, grads: tuple, grad_out: dict, calls: int = 1):
    def step():
        for _ in range(calls):
            for k in grads:
                inputs[k].grad = None
            y = fn(inputs)
            if "g" not in grad_out:
                grad_out["g"] = torch.randn_like(y)
            y.backward(grad_out["g"])
    return step


def _around(step, around):
    """step run inside around() (a context manager factory), or step itself."""
    if around is None:
        return step

    def inside():
        with around():
            step()
    return inside


@contextlib.contextmanager
def tf32_matmuls(on: bool):
    """fp32 matmuls as tf32 (torch.backends.cuda.matmul.allow_tf32) inside, when on; restored after."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = before or on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def measure(case: Case, device: torch.device, dtype: torch.dtype, reps: int, seed: int = 0) -> dict:
    with tf32_matmuls(case.tf32):
        row = _measure(case, device, dtype, reps, seed)
    if case.tf32:
        row["tf32"] = True
    return row


def _measure(case: Case, device: torch.device, dtype: torch.dtype, reps: int, seed: int = 0) -> dict:
    """Forward and forward+backward of swisk and the reference as interleaved pairs (the allocator as
    users have it): per side min / median / max, the speed-up as the median of per-pair ratios."""
    gen = torch.Generator().manual_seed(seed)
    inputs = case.setup(device, dtype, gen)
    row = {"op": case.op, "case": case.label, "dtype": str(dtype).replace("torch.", ""), "goal": case.goal,
           "threads": torch.get_num_threads()}
    if case.route:
        row["route"] = case.route
    if case.info:
        row.update(case.info(inputs, device))
    n = case.calls
    phases = [("fwd", lambda fn, g: _forward(fn, inputs, n))]
    if case.grads:
        phases.append(("fwdbwd", lambda fn, g: _fwd_bwd(fn, inputs, case.grads, g, n)))
    for phase, make in phases:
        try:
            t = paired_ms(_around(make(case.run, {}), case.around), make(case.reference, {}), device, reps)
        except torch.OutOfMemoryError:
            row["swisk_error"] = "out of memory"
            torch.cuda.empty_cache()
            continue
        for side, key in (("swisk", "a"), ("reference", "b")):
            row[f"{side}_{phase}_ms"] = t[key]["median"] / n
            row[f"{side}_{phase}_ms_min_max"] = [t[key]["min"] / n, t[key]["max"] / n]
        row[f"{phase}_speedup"] = t["ratio"]
        row["reps"] = t["reps"]
    for phase, mult in (("fwd", 1), ("fwdbwd", 1 + case.backward_products)):
        ms = row.get(f"swisk_{phase}_ms")
        if ms and case.flops:
            row[f"swisk_{phase}_tflops"] = mult * case.flops / ms / 1e9
        if ms and case.useful_flops:
            row[f"swisk_{phase}_useful_tflops"] = mult * case.useful_flops / ms / 1e9
    if case.bytes and row.get("swisk_fwd_ms"):  # bytes are counted at 4 per element: scaled to the dtype
        scale = torch.empty(0, dtype=dtype).element_size() / 4
        row["swisk_fwd_gbps"] = case.bytes * scale / row["swisk_fwd_ms"] / 1e6
    if case.calls > 1:  # per-call overhead rows: microseconds per call
        for phase in ("fwd", "fwdbwd"):
            if row.get(f"swisk_{phase}_ms"):
                row[f"swisk_{phase}_us_per_call"] = row[f"swisk_{phase}_ms"] * 1e3
    if case.evals and row.get("swisk_fwd_ms"):
        row["swisk_fwd_gevals_per_s"] = case.evals / row["swisk_fwd_ms"] / 1e6
    return row


_TARGET = re.compile(r"^(?:(cpu|cuda|mps):\s*)?([a-z0-9_]+)\s*(>=|<=)\s*([0-9.eE+-]+)$")


def check_goals(row: dict, case: Case, device: torch.device) -> dict:
    """Each target of the case that applies to this device, against the row (adds to row): goal_checks
    [{target, value, met}] and goal_met (all met; None where no target applies or a value is missing)."""
    checks = []
    for t in case.targets:
        m = _TARGET.match(t)
        if m is None:
            raise ValueError(f"[bench] {case.op} {case.label}: target {t!r} is not '[device: ]key >= value'")
        dev, key, op, bound = m.group(1), m.group(2), m.group(3), float(m.group(4))
        if dev and dev != device.type:
            continue
        value = row.get(key)
        met = None if value is None else (value >= bound if op == ">=" else value <= bound)
        checks.append({"target": t, "value": value, "met": met})
    if checks:
        row["goal_checks"] = checks
        row["goal_met"] = None if any(c["met"] is None for c in checks) else all(c["met"] for c in checks)
    return row


def measure_memory(row: dict, case: Case, device: torch.device, dtype: torch.dtype, seed: int = 0) -> dict:
    with tf32_matmuls(case.tf32):
        return _measure_memory(row, case, device, dtype, seed)


def _measure_memory(row: dict, case: Case, device: torch.device, dtype: torch.dtype, seed: int = 0) -> dict:
    """Peak memory of one forward and one forward+backward after a warm-up (adds to row). The warm-up's
    gradients are dropped before the measured step, so its peak counts the gradients it returns, as a
    training step with zero_grad(set_to_none=True) has it; grad_bytes are those gradients where both
    sides return the same ones, and the working ratio compares the peaks without them: the memory an
    op spends beyond its outputs. On the CPU this runs after every timing: it makes glibc return freed
    memory, which would slow timed allocations."""
    if device.type == "cpu":
        _return_freed_memory()
    gen = torch.Generator().manual_seed(seed)
    inputs = case.setup(device, dtype, gen)
    grad_bytes: dict = {}
    for name, fn in (("swisk", case.run), ("reference", case.reference)):
        grad_out: dict = {}
        if row.get(f"{name}_error"):
            continue
        around = case.around if name == "swisk" else None
        steps = [("fwd", _around(_forward(fn, inputs), around))]
        if case.grads:
            steps.append(("fwdbwd", _around(_fwd_bwd(fn, inputs, case.grads, grad_out), around)))
        for phase, step in steps:
            step()  # warm-up: lazy initialisation stays out of the peak
            if phase == "fwdbwd":
                grad_bytes[name] = sum(inputs[k].grad.nbytes for k in case.grads if inputs[k].grad is not None)
                for k in case.grads:
                    inputs[k].grad = None
            with PeakMemory(device) as m:
                step()
            row[f"{name}_{phase}_peak_bytes"] = m.peak
    for phase in ("fwd", "fwdbwd"):
        sm, rm = row.get(f"swisk_{phase}_peak_bytes"), row.get(f"reference_{phase}_peak_bytes")
        if sm is not None and rm:
            row[f"{phase}_memory_ratio"] = sm / rm
    if "swisk" in grad_bytes and grad_bytes.get("reference") == grad_bytes["swisk"]:  # not so against a
        row["grad_bytes"] = grad_bytes["swisk"]  # peer module, whose own parameters take its gradients
    g = row.get("grad_bytes")
    sm, rm = row.get("swisk_fwdbwd_peak_bytes"), row.get("reference_fwdbwd_peak_bytes")
    if g is not None and sm is not None and rm is not None and rm > g:
        row["fwdbwd_working_ratio"] = max(0, sm - g) / (rm - g)
    return row


def _forward(fn, inputs: dict, calls: int = 1):
    def fwd():
        with torch.no_grad():
            for _ in range(calls):
                fn(inputs)
    return fwd


# ---- the device's own ceilings ---------------------------------------------------------------------


def device_ceilings(device: torch.device, dtypes, reps: int, tf32: bool = False) -> dict:
    """A large matrix product per dtype (TFLOP/s; "tf32": fp32 under allow_tf32, when asked) and a
    device-to-device copy (GB/s, read + write)."""
    n = 4096 if device.type != "cpu" else 1024
    out = {"matmul_tflops": {}}
    kinds = [(str(dt).replace("torch.", ""), dt, False) for dt in dtypes]
    kinds += [("tf32", torch.float32, True)] if tf32 else []
    for name, dt, on in kinds:
        a = torch.randn(n, n, device=device).to(dt)
        b = torch.randn(n, n, device=device).to(dt)
        with tf32_matmuls(on):
            ms = median_ms(lambda: torch.mm(a, b), device, reps)
        out["matmul_tflops"][name] = 2 * n**3 / ms / 1e9
    src = torch.randn(64 * 2**20 // 4 if device.type == "cpu" else 256 * 2**20, device=device)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, reps)
    out["copy_gbps"] = 2 * src.numel() * 4 / ms / 1e6
    return out


def _cpu_name() -> str:
    """The CPU's model name, with its family and model numbers: a VM's name often hides the generation
    ("AMD EPYC" is Zen 3 at family 25 model 1, Zen 5 at family 26)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def environment(device: torch.device) -> dict:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    elif device.type == "mps":
        name = "Apple MPS (" + platform.machine() + ")"
    else:
        name = _cpu_name()
    info = _C.build_info()
    # the commit the build recorded (git rev-parse at configure time); a build without git (an sdist)
    # says so instead of borrowing the commit of whatever repository the bench runs in
    commit = info.get("commit") or "unknown (built without git metadata)"
    return {
        "device": str(device), "device_name": name, "threads": torch.get_num_threads(),
        "torch": torch.__version__, "python": platform.python_version(), "swisk": info["version"],
        "build": dict(info), "commit": commit, "platform": platform.platform(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def to_json(path: str, env: dict, ceilings: dict, rows: list) -> None:
    with open(path, "w") as f:
        json.dump({"environment": env, "ceilings": ceilings, "rows": rows}, f, indent=2)
