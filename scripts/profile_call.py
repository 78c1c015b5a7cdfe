"""Where the time of one small call goes (the bench's "per call" rows): wall time per call, then the
Python functions (cProfile) and torch's ops and kernels (torch.profiler) behind it.
usage: python scripts/profile_call.py [--device cuda] [--calls 300] [--top 18]"""
import argparse
import cProfile
import io
import pstats
import time

import torch

import swisk


def _layers(device):
    torch.manual_seed(0)
    return {
        "kan_linear": swisk.nn.KANLinear(4, 4).to(device),
        "wavelet_kan": swisk.nn.WaveletKANLinear(4, 4, batch_norm=False).to(device),
    }


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _per_call_us(step, device, calls):
    for _ in range(20):
        step()
    _sync(device)
    t = time.perf_counter()
    for _ in range(calls):
        step()
    _sync(device)
    return (time.perf_counter() - t) / calls * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--top", type=int, default=18)
    args = p.parse_args()
    device = torch.device(args.device)
    x = torch.randn(2, 4, device=device)
    for name, layer in _layers(device).items():
        def fwd():
            with torch.no_grad():
                layer(x)

        def fwd_bwd():
            layer(x.requires_grad_()).sum().backward()

        routes = ("gemm", "fused") if name == "kan_linear" else ("",)
        for route in routes:
            with swisk.config.using(**({"kan_route": route} if route else {})):
                for what, step in (("forward", fwd), ("forward+backward", fwd_bwd)):
                    us = _per_call_us(step, device, args.calls)
                    print(f"\n==== {name} {route} {what}: {us:.1f} us per call")
                    prof = cProfile.Profile()
                    prof.enable()
                    for _ in range(args.calls):
                        step()
                    prof.disable()
                    s = io.StringIO()
                    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(args.top)
                    print("\n".join(l for l in s.getvalue().splitlines() if l.strip())[:6000])
                    acts = [torch.profiler.ProfilerActivity.CPU]
                    if device.type == "cuda":
                        acts.append(torch.profiler.ProfilerActivity.CUDA)
                    with torch.profiler.profile(activities=acts) as tp:
                        for _ in range(50):
                            step()
                        _sync(device)
                    print(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))


if __name__ == "__main__":
    main()
