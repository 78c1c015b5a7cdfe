"""Where a large step's device time goes: per case, the wall time of forward and forward+backward (CUDA
events), the sum of its kernels' times, and its kernels and ops by device time (torch.profiler). Written
for the rows that miss their goals on a GPU: kan_linear in bf16 and tf32 against a same-shape matmul,
kan_conv2d's backward, sketched_linear.
usage: python scripts/gpu_profile.py [--case NAME ...] [--device cuda] [--top 14]"""
import argparse
import contextlib
import time

import torch

import swisk


def _kan(dtype=torch.float32, b=4096, f=1024, g=5):
    layer = swisk.nn.KANLinear(f, f, grid_size=g).to(DEV)
    x = torch.randn(b, f, device=DEV)
    return layer, x, dtype


def _conv(dtype=torch.float32):
    layer = swisk.nn.KANConv2d(32, 32, 3, padding=1).to(DEV)
    return layer, torch.randn(32, 32, 28, 28, device=DEV), dtype


def _sketched(dtype=torch.float32):
    layer = swisk.nn.SKLinear(2048, 1024, num_terms=8, low_rank=128).to(DEV)
    return layer, torch.randn(256, 2048, device=DEV), dtype


DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CASES = {
    "kan_f32": lambda: _kan(), "kan_tf32": lambda: _kan(torch.float32), "kan_bf16": lambda: _kan(torch.bfloat16),
    "kan_g16_bf16": lambda: _kan(torch.bfloat16, g=16),
    "conv_f32": lambda: _conv(), "conv_bf16": lambda: _conv(torch.bfloat16),
    "sketched_bf16": lambda: _sketched(torch.bfloat16),
}


def _settings(name, dtype):
    """tf32 for the tf32 case alone; bf16 cases under autocast (as the bench runs them)."""
    stack = contextlib.ExitStack()
    if DEV.type == "cuda":
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = name.endswith("tf32")
        stack.callback(lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", old))
    if dtype != torch.float32:
        stack.enter_context(torch.autocast(DEV.type, dtype=dtype))
    return stack


def _sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def _ms(step, calls=5):
    """Median wall time of a step (synchronised)."""
    step()
    _sync()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        step()
        _sync()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e3


def _device_us(event) -> float:
    for attr in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, attr):
            return float(getattr(event, attr))
    return 0.0


def profile(name, top):
    layer, x, dtype = CASES[name]()
    params = list(layer.parameters())

    def fwd():
        with torch.no_grad():
            layer(x)

    def fwd_bwd():
        for p in params:
            p.grad = None
        layer(x.requires_grad_()).float().sum().backward()

    acts = [torch.profiler.ProfilerActivity.CPU]
    if DEV.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    key = "self_device_time_total" if DEV.type == "cuda" else "self_cpu_time_total"
    with _settings(name, dtype):
        for what, step in (("forward", fwd), ("forward+backward", fwd_bwd)):
            ms = _ms(step)
            with torch.profiler.profile(activities=acts) as prof:
                for _ in range(3):
                    step()
                _sync()
            events = prof.key_averages()
            kernels = sum(_device_us(e) for e in events if getattr(e, "device_type", None) is not None
                          and "CUDA" in str(e.device_type)) / 3e3
            print(f"\n==== {name} {what}: {ms:.3f} ms a step (wall), kernels {kernels:.3f} ms a step")
            print(events.table(sort_by=key, row_limit=top, max_name_column_width=70))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", action="append", choices=sorted(CASES), help="repeatable; default: all")
    p.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    p.add_argument("--top", type=int, default=14)
    args = p.parse_args()
    global DEV
    DEV = torch.device(args.device or DEV.type)
    torch.manual_seed(0)
    for name in args.case or CASES:
        profile(name, args.top)


if __name__ == "__main__":
    main()
