"""The SASS check (scripts/sass_check.py): no fp64 instructions in the fp32/fp16/bf16 kernels and no
local-memory traffic, on sm_90a. Runs where nvcc, cuobjdump and nvdisasm are present."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _sass_check():
    spec = importlib.util.spec_from_file_location("sass_check", ROOT / "scripts" / "sass_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


sc = _sass_check()
_missing = [t for t in ("nvcc", "cuobjdump", "nvdisasm") if sc.find_tool(t) is None]


def test_fp64_and_local_memory_detection():
    """The SASS parser sees fp64 and local-memory instructions (no toolkit needed)."""
    sass = """
        Function : _Z3fooPf
        /*0000*/                   F2F.F64.F32 R2, R4 ;
        /*0010*/                   DMUL R2, R2, c[0x0][0x10] ;
        /*0020*/               @P0 STL [R1], R2 ;
        /*0030*/                   FFMA R0, R1, R2, R3 ;
        /*0040*/                   DEPBAR.LE SB0, 0x0 ;
        Function : _Z3barPf
        /*0000*/                   FMUL R0, R1, R2 ;
    """
    kernels = {}
    sc.parse_sass(sass, kernels)
    assert (kernels["_Z3fooPf"].fp64, kernels["_Z3fooPf"].local_ops) == (2, 1)
    assert (kernels["_Z3barPf"].fp64, kernels["_Z3barPf"].local_ops) == (0, 0)
    k = sc.Kernel("k", regs=128, smem=16640, threads=256)
    assert sc.occupancy(k) == 0.25  # 128 regs x 256 threads: two blocks of eight warps


@pytest.mark.skipif(bool(_missing), reason=f"needs {', '.join(_missing)} (pip install nvidia-cuda-cuobjdump "
                                           "nvidia-cuda-nvdisasm; nvcc from the CUDA toolkit)")
def test_sass_has_no_fp64_and_no_spills(capsys):
    kernels, problems = sc.check("sm_90a", jobs=4, keep=None)
    print(sc.table(kernels))
    assert len(kernels) > 20
    assert not problems, "\n".join(problems)
