"""kan_linear's two routes (fused kernels, vendor GEMM over basis tiles) across layer sizes on one
device: the medians behind routes.py's rule. Interleaved pairs, device-synchronised wall time.
usage: python scripts/kan_route_sweep.py [--device cuda] [--reps 15] [--threads N] [--dtypes float32,bfloat16]
       [--phases fwd,fwdbwd] [--sizes ROWSxINxOUT,...] [--grid-size G] [--json FILE]"""
import argparse
import json
import time

import torch

import swisk

SIZES = [(1, 4, 4), (2, 4, 4), (64, 4, 4), (4096, 2, 16), (1, 64, 64), (64, 64, 64), (1024, 64, 64),
         (1, 256, 256), (64, 256, 256), (1024, 256, 256), (64, 784, 64), (1, 1024, 1024), (16, 1024, 1024),
         (256, 1024, 1024)]


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _once(step, device):
    _sync(device)
    t = time.perf_counter()
    step()
    _sync(device)
    return (time.perf_counter() - t) * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--threads", type=int, help="torch's CPU threads (one count per process)")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--phases", default="fwd,fwdbwd")
    p.add_argument("--sizes", help="comma-separated ROWSxINxOUT (default: the CUDA sweep's sizes)")
    p.add_argument("--grid-size", type=int, default=5)
    p.add_argument("--json")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")] if args.sizes else SIZES
    phases = args.phases.split(",")
    device = torch.device(args.device)
    rows = []
    print(f"{'rows':>6} {'in':>5} {'out':>5} {'dtype':<9} {'phase':<7} {'fused ms':>9} {'gemm ms':>9} "
          f"{'fused/gemm':>10}")
    for dtype in (getattr(torch, d) for d in args.dtypes.split(",")):
        for b, i, o in sizes:
            torch.manual_seed(0)
            layer = swisk.nn.KANLinear(i, o, grid_size=args.grid_size).to(device, dtype)
            x = torch.randn(b, i, device=device, dtype=dtype)

            def fwd():
                with torch.no_grad():
                    layer(x)

            def fwd_bwd():
                layer(x.requires_grad_()).sum().backward()

            for phase, step in ((ph, st) for ph, st in (("fwd", fwd), ("fwdbwd", fwd_bwd)) if ph in phases):
                times = {"fused": [], "gemm": []}
                for rep in range(args.reps + 2):
                    for route in ("fused", "gemm") if rep % 2 else ("gemm", "fused"):
                        with swisk.config.using(kan_route=route):
                            t = _once(step, device)
                        if rep >= 2:
                            times[route].append(t)
                med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
                row = {"rows": b, "in": i, "out": o, "grid_size": args.grid_size, "dtype": str(dtype)[6:],
                       "phase": phase, "fused_ms": med["fused"], "gemm_ms": med["gemm"],
                       "ratio": med["fused"] / med["gemm"]}
                rows.append(row)
                print(f"{b:>6} {i:>5} {o:>5} {row['dtype']:<9} {phase:<7} {med['fused']:9.3f} {med['gemm']:9.3f} "
                      f"{row['ratio']:10.2f}", flush=True)
    if args.json:
        env = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "torch": torch.__version__, "swisk": swisk.__version__, "build": dict(swisk.build_info()),
               "threads": torch.get_num_threads()}
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
