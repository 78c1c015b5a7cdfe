"""python -m swisk {info, bench}."""
from __future__ import annotations

import argparse
import sys


def info() -> int:
    import torch

    import swisk
    from swisk import _C

    print(f"swisk {swisk.__version__} (torch {torch.__version__})")
    print("build:")
    for k, v in swisk.build_info().items():
        print(f"  {k}: {v}")
    print("backends (compiled and usable here):")
    for k, v in swisk.backends().items():
        print(f"  {k}: {v}")
    print(f"default device: {swisk.default_device()}")
    print("devices:")
    print(f"  cpu: {torch.get_num_threads()} threads")
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            print(f"  cuda:{i}: {p.name}, sm_{p.major}{p.minor}, {p.total_memory / 2**30:.1f} GiB")
    else:
        print(f"  cuda: none (swisk sees {_C.cuda_device_count()} device(s))")
    print(f"  mps: {'available' if torch.backends.mps.is_available() else 'none'}")
    print("ops: " + ", ".join(swisk.ops.__all__))
    print("kernels: " + ", ".join(_C.ops()))
    print(f"settings: kan_route={swisk.config.get('kan_route')}, "
          f"workspace_bytes={swisk.config.get('workspace_bytes')}")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m swisk")
    p.add_argument("command", choices=["info", "bench"])
    args, rest = p.parse_known_args(argv[:1])
    if args.command == "info":
        return info()
    from swisk.bench import main as bench_main

    return bench_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
