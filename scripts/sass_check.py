#!/usr/bin/env python3
"""SASS check of the CUDA kernels: compiles cuda/*.cu for one arch (sm_90a) with the flags CMake uses,
dumps SASS and resource usage, prints one row per kernel and fails on fp64 instructions in the
fp32/fp16/bf16 kernels and on local-memory traffic (spills, STL/LDL).

    python scripts/sass_check.py [--arch sm_90a] [--jobs N] [--json out.json] [--keep DIR]

Exit status: 0 clean, 1 violations, 2 tools missing or a compile failed.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Threads per block of each kernel, as its launch code in cuda/*.cu configures it (first match wins).
BLOCK_THREADS = [
    ("kan_mma_pack_kernel", 256),
    ("kan_mma_", 128),  # SWISK_KAN_MMA_THREADS (also its __launch_bounds__)
    ("kan_backward_scale_kernel", 256),
    ("kan_", 256),  # SWISK_KAN_TILE x SWISK_KAN_TILE
    ("wavelet_kan_", 256),  # SWISK_WAV_THREADS (also its __launch_bounds__)
    ("bspline_", 256),
    ("sketch_", 128),  # SWISK_SKETCH_THREADS
    ("fwht_shared_kernel<15", 1024),  # 2^(L-5) threads for chunks of 2^L
    ("fwht_shared_kernel<14", 512),
    ("fwht_", 256),  # SWISK_FWHT_THREADS
    ("srht_", 256),  # SWISK_FWHT_THREADS
    ("sparse_table_", 128),  # SWISK_SKETCH_THREADS (its shared rows)
    ("sparse_", 256),  # SWISK_SPARSE_THREADS
]

# Dynamic shared memory per block (ptxas counts static arrays only), as the launch code gives it.
DYNAMIC_SMEM = [("fwht_shared_kernel<15", 135168), ("fwht_shared_kernel<14", 67584), ("fwht_shared_kernel<13", 33792)]

# sm_90 per-SM limits (CUDA occupancy calculator figures).
SM90 = dict(regs=65536, reg_unit=256, warps=64, blocks=32, smem=233472, smem_unit=128, smem_reserved=1024)

FP64_OPS = {"DADD", "DMUL", "DFMA", "DSETP", "DSET", "DMNMX", "DMMA"}
CONVERT_OPS = {"F2F", "I2F", "F2I", "FRND", "I2FP", "F2IP"}
FUNC_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
INSN_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)")


@dataclass
class Kernel:
    mangled: str
    name: str = ""
    regs: int = 0
    smem: int = 0
    stack: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    local_ops: int = 0  # STL/LDL instructions
    fp64: int = 0
    fp64_examples: list = field(default_factory=list)
    threads: int = 0
    occupancy: float = 0.0
    source: str = ""


def find_tool(name: str) -> str | None:
    """A CUDA tool on PATH, next to nvcc, under CUDA_HOME, or in the nvidia-cuda-* pip packages."""
    hit = shutil.which(name)
    if hit:
        return hit
    dirs = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        dirs.append(str(Path(os.path.realpath(nvcc)).parents[1]))
    cands = [Path(d) / "bin" / name for d in dirs if d]
    try:
        import nvidia  # namespace package of the nvidia-cuda-* wheels

        for base in nvidia.__path__:
            cands += sorted(Path(base).glob(f"*/bin/{name}"))
    except ImportError:
        pass
    return next((str(c) for c in cands if c.is_file() and os.access(c, os.X_OK)), None)


def compile_flags(arch: str) -> list[str]:
    """The flags CMake gives the .cu files (CMakeLists.txt: CUDA part), for one real arch."""
    return [
        "-std=c++20", "-O3", "--expt-relaxed-constexpr", f"-arch={arch}", "-cubin", "-Xptxas=-v",
        f"-I{ROOT / 'cpp/include'}", f"-I{ROOT / 'cpp/src'}", f"-I{ROOT}",
        f'-DSWISK_CUDA_ARCHS_STR="{arch.removeprefix("sm_")}-real"', "-DNDEBUG",
    ]


def compile_one(nvcc: str, src: Path, out: Path, arch: str) -> tuple[Path, str]:
    cmd = [nvcc, *compile_flags(arch), str(src), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"nvcc failed on {src.name}:\n{r.stdout}{r.stderr}")
    return out, r.stdout + r.stderr


def parse_ptxas(log: str, kernels: dict[str, Kernel]) -> None:
    """Registers, shared memory, stack and spills per function from `ptxas -v`."""
    cur = None
    for line in log.splitlines():
        m = re.search(r"(?:Compiling entry function|Function properties for) '?([\w$]+)'?", line)
        if m:
            cur = kernels.setdefault(m.group(1), Kernel(m.group(1)))
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            cur.stack, cur.spill_stores, cur.spill_loads = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur.regs = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur.smem = int(s.group(1)) if s else 0


def is_fp64(op: str, mods: str) -> bool:
    if op in FP64_OPS:
        return True
    if op in CONVERT_OPS and ".F64" in mods:
        return True
    return op == "MUFU" and "64" in mods  # MUFU.RCP64H, MUFU.RSQ64H


def parse_sass(sass: str, kernels: dict[str, Kernel]) -> None:
    """fp64 and local-memory instructions per function from `cuobjdump -sass`."""
    cur = None
    for line in sass.splitlines():
        m = FUNC_RE.match(line)
        if m:
            cur = kernels.setdefault(m.group(1), Kernel(m.group(1)))
            continue
        m = INSN_RE.search(line) if cur else None
        if not m:
            continue
        op, mods = m.group(1), m.group(2)
        if op in ("STL", "LDL"):
            cur.local_ops += 1
        if is_fp64(op, mods):
            cur.fp64 += 1
            if len(cur.fp64_examples) < 3:
                cur.fp64_examples.append(op + mods)


def demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("cu++filt") or find_tool("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    r = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True)
    out = r.stdout.splitlines()
    return dict(zip(names, out)) if r.returncode == 0 and len(out) == len(names) else {n: n for n in names}


def short_name(demangled: str) -> str:
    """`void swisk::cuda_backend::kan_forward_kernel<float>(KanParams, ...)` -> `kan_forward_kernel<float>`."""
    s = re.sub(r"^void\s+", "", demangled)
    s = re.sub(r"swisk::cuda_backend::", "", s)
    depth, end = 0, len(s)
    for i, ch in enumerate(s):  # cut the parameter list (first '(' outside template brackets)
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            end = i
            break
    s = s[:end].replace("__nv_bfloat16", "bf16").replace("__half", "fp16")
    return re.sub(r"std::integral_constant<int, (\d+)>", r"\1", s)


def occupancy(k: Kernel) -> float:
    """Theoretical occupancy on sm_90: resident warps / 64, limited by threads, registers, shared memory."""
    if k.threads <= 0:
        return 0.0
    warps = -(-k.threads // 32)
    by_threads = min(SM90["blocks"], SM90["warps"] // warps)
    regs_warp = -(-max(k.regs, 1) * 32 // SM90["reg_unit"]) * SM90["reg_unit"]
    by_regs = (SM90["regs"] // regs_warp) // warps
    smem = -(-(k.smem + SM90["smem_reserved"]) // SM90["smem_unit"]) * SM90["smem_unit"]
    by_smem = SM90["smem"] // smem
    return min(by_threads, by_regs, by_smem) * warps / SM90["warps"]


def block_threads(name: str) -> int:
    return next((t for key, t in BLOCK_THREADS if key in name), 0)


def check(arch: str, jobs: int, keep: str | None) -> tuple[list[Kernel], list[str]]:
    nvcc, cuobjdump = find_tool("nvcc"), find_tool("cuobjdump")
    if not nvcc or not cuobjdump:
        raise FileNotFoundError(f"nvcc: {nvcc or 'not found'}, cuobjdump: {cuobjdump or 'not found'}")
    nvdisasm = find_tool("nvdisasm")  # cuobjdump -sass runs it
    if not nvdisasm:
        raise FileNotFoundError("nvdisasm: not found (cuobjdump -sass needs it)")
    env = dict(os.environ, NVDISASM_PATH=str(Path(nvdisasm).parent))
    sources = sorted((ROOT / "cuda").glob("*.cu"))
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="swisk_sass_"))
    work.mkdir(parents=True, exist_ok=True)
    kernels: list[Kernel] = []
    try:
        with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futs = {pool.submit(compile_one, nvcc, s, work / (s.stem + ".cubin"), arch): s for s in sources}
            results = [f.result() for f in cf.as_completed(futs)]
        for cubin, log in sorted(results):
            found: dict[str, Kernel] = {}
            parse_ptxas(log, found)
            r = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, env=env)
            if r.returncode != 0 and found:  # a cubin without kernels (backend.cu) makes cuobjdump fail too
                raise RuntimeError(f"cuobjdump failed on {cubin.name}: {r.stderr.strip()}")
            parse_sass(r.stdout, found)
            for k in found.values():
                k.source = cubin.stem + ".cu"
            kernels += [k for k in found.values() if k.mangled.startswith("_Z")]
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    names = demangle([k.mangled for k in kernels])
    problems = []
    for k in kernels:
        k.name = short_name(names[k.mangled])
        k.threads = block_threads(k.name)
        k.smem += next((b for key, b in DYNAMIC_SMEM if key in k.name), 0)
        k.occupancy = occupancy(k)
        if k.fp64 and "double" not in k.name:
            problems.append(f"{k.name}: {k.fp64} fp64 instruction(s), e.g. {', '.join(k.fp64_examples)}")
        if k.spill_stores or k.spill_loads or k.local_ops:
            problems.append(f"{k.name}: local memory (spill stores {k.spill_stores} B, spill loads "
                            f"{k.spill_loads} B, {k.local_ops} STL/LDL)")
    kernels.sort(key=lambda k: (k.source, k.name))
    return kernels, problems


def table(kernels: list[Kernel]) -> str:
    head = ("kernel", "regs", "smem B", "stack B", "spill B", "STL/LDL", "fp64", "threads", "occupancy")
    rows = [(k.name, k.regs, k.smem, k.stack, k.spill_stores + k.spill_loads, k.local_ops, k.fp64, k.threads,
             f"{k.occupancy:.0%}") for k in kernels]
    widths = [max(len(str(r[c])) for r in [head, *rows]) for c in range(len(head))]
    fmt = lambda r: "  ".join(str(v).ljust(w) if c == 0 else str(v).rjust(w) for c, (v, w) in enumerate(zip(r, widths)))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, rows)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", help="also write the rows and violations as JSON here")
    ap.add_argument("--keep", help="keep the cubins in this folder")
    args = ap.parse_args(argv)
    try:
        kernels, problems = check(args.arch, args.jobs, args.keep)
    except (FileNotFoundError, RuntimeError) as e:
        print(f"sass_check: {e}", file=sys.stderr)
        return 2
    print(f"SASS of cuda/*.cu for {args.arch} (occupancy: sm_90 limits, block size from the launch code)")
    print(table(kernels))
    if args.json:
        Path(args.json).write_text(json.dumps({"arch": args.arch, "kernels": [asdict(k) for k in kernels],
                                               "violations": problems}, indent=1))
    for p in problems:
        print("VIOLATION " + p)
    print(f"{len(kernels)} kernels, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
