"""The build's platform probes, run as CMake scripts with stand-in tools."""
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _probe_metal(tmp_path, xcrun_body: str) -> str:
    xcrun = tmp_path / "xcrun"
    xcrun.write_text("#!/bin/sh\n" + xcrun_body + "\n")
    xcrun.chmod(0o755)
    script = tmp_path / "probe.cmake"
    script.write_text(f'include("{ROOT / "cmake" / "metal_toolchain.cmake"}")\n'
                      f'swisk_metal_toolchain("{xcrun}" ok)\nmessage(STATUS "metal=${{ok}}")\n')
    r = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_metal_probe_without_the_metal_compiler(tmp_path):
    """A Mac with only the Command Line Tools: xcrun exists, `xcrun -f metal` fails. The Metal build
    step must then be skipped (SWISK_METAL=AUTO installs), not attempted."""
    clt_only = 'echo "xcrun: error: unable to find utility \\"$3\\", not a developer tool or in PATH" >&2; exit 72'
    assert "metal=OFF" in _probe_metal(tmp_path, clt_only)
    assert "metal=ON" in _probe_metal(tmp_path, 'echo /usr/bin/$3; exit 0')
