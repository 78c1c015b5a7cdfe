"""The CPU wavelet kernels' lane loops vectorise in the AVX-512 and AVX2 clones, for every wavelet and
dtype. They rely on GCC's loop vectoriser (wavelet_eval is written with selects only): a select of two
compares' mask in meyer's derivative once made its backward run scalar, 25x slower, every result right.
Compiles cpu/wavelet.cpp as the build does (target clones included) and reads GCC's vectoriser dump."""
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "cpp" / "src" / "cpu" / "wavelet.cpp"
MARK = re.compile(r"// lanes of (fwd_block|bwd_block): must vectorise")
WAVELETS, DTYPES = 5, 4  # SWISK_WAVELETS; float, double, f16, bf16


def _gcc():
    gxx = shutil.which("g++")
    if gxx is None or platform.machine() != "x86_64" or platform.system() != "Linux":
        return None
    version = subprocess.run([gxx, "--version"], capture_output=True, text=True).stdout
    return gxx if "clang" not in version.lower() else None


def _vectorised(dump: str) -> dict:
    """{(kernel, clone, wavelet, dtype): vector widths of the marked loops} from -fdump-tree-vect-optimized."""
    marks = {n + 1: m.group(1) for n, text in enumerate(SOURCE.read_text().splitlines()) if (m := MARK.search(text))}
    head = re.compile(r"^;; Function .*?(fwd_block|bwd_block).*?\.arch_x86_64_(v4|v3)<(\d+), ([\w:]+)")
    done = re.compile(r"wavelet\.cpp:(\d+):\d+: optimized: loop vectorized using (\d+) byte")
    out, key = {}, None
    for line in dump.splitlines():
        if line.startswith(";; Function"):
            m = head.match(line)
            key = m.groups() if m else None
            if key:
                out[key] = set()
        elif key and (m := done.search(line)) and marks.get(int(m.group(1))) == key[0]:
            out[key].add(int(m.group(2)))
    return out


@pytest.mark.skipif(_gcc() is None, reason="needs GCC on x86-64 Linux (the target clones' compiler)")
def test_wavelet_lane_loops_vectorise(tmp_path):
    assert sorted(MARK.findall(SOURCE.read_text())) == ["bwd_block", "fwd_block"], "the lane loops carry the mark"
    dump = tmp_path / "vect.txt"
    subprocess.run([_gcc(), "-O3", "-std=gnu++20", "-fno-trapping-math", "-fopenmp-simd", "-DSWISK_CPU_WIDE=1",
                    f"-I{ROOT / 'cpp' / 'include'}", f"-I{ROOT / 'cpp' / 'src'}", "-c", str(SOURCE), "-o",
                    str(tmp_path / "wavelet.o"), f"-fdump-tree-vect-optimized={dump}"],
                   check=True, capture_output=True, text=True)
    found = _vectorised(dump.read_text())
    assert len(found) == 2 * 2 * WAVELETS * DTYPES, sorted(found)
    width = {"v4": 64, "v3": 32}
    scalar = sorted(k for k, w in found.items() if width[k[1]] not in w)
    assert not scalar, f"lane loops left scalar (kernel, clone, wavelet, dtype): {scalar}"
