"""python -m swisk {info, bench} (and --version)."""
from __future__ import annotations

import argparse
import json
import os
import sys


def _info_dict() -> dict:
    import torch

    import swisk
    from swisk import _C

    devices = {"cpu": {"threads": torch.get_num_threads()}}
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            devices[f"cuda:{i}"] = {"name": p.name, "sm": f"{p.major}{p.minor}",
                                    "memory_gib": round(p.total_memory / 2**30, 1)}
    devices["mps"] = bool(torch.backends.mps.is_available())
    return {"swisk": swisk.__version__, "torch": torch.__version__, "build": swisk.build_info(),
            "backends": swisk.backends(), "default_device": str(swisk.default_device()), "devices": devices,
            "ops": list(swisk.ops.__all__), "kernels": list(_C.ops()),
            "settings": {"kan_route": swisk.config.get("kan_route"),
                         "workspace_bytes": swisk.config.get("workspace_bytes")}}


def info(argv=()) -> int:
    p = argparse.ArgumentParser(prog="python -m swisk info", description="How swisk was built and what it sees here.")
    p.add_argument("--json", action="store_true", help="print the same as one JSON object")
    args = p.parse_args(argv)
    if args.json:
        print(json.dumps(_info_dict(), indent=2, default=str))
        return 0
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


def _version() -> str:
    import torch

    import swisk

    return f"swisk {swisk.__version__} (torch {torch.__version__})"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog="python -m swisk", description="swisk: spline, wavelet and sketch kernels "
                                "for PyTorch. Commands: info (build and devices), bench (every op against its "
                                "reference).")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument("command", nargs="?", choices=["info", "bench"])
    args, _ = p.parse_known_args(argv[:1])
    if args.version:
        print(_version())
        return 0
    if args.command is None:
        p.error("a command is needed: info or bench (or --version)")
    if args.command == "info":
        return info(argv[1:])
    from swisk.bench import main as bench_main

    return bench_main(argv[1:])


def _run() -> int:
    """main, quiet when the reader of a pipe goes away (python -m swisk bench | head)."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 1


if __name__ == "__main__":
    sys.exit(_run())
