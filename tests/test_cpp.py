"""The C++ kernel tests (tests/cpp), one pytest item per TEST(Suite, Name)."""
import os
import subprocess
from importlib import resources

import pytest


def _binary():
    path = os.environ.get("SWISK_CPP_TESTS") or str(resources.files("swisk").joinpath("_tests", "swisk_cpp_tests"))
    return path if os.path.exists(path) else None


def _names():
    exe = _binary()
    if exe is None:
        return [pytest.param("missing", marks=pytest.mark.skip(
            reason="the C++ tests were not built: install with -Ccmake.define.SWISK_TESTS=ON"))]
    out = subprocess.run([exe, "--list"], check=True, capture_output=True, text=True, timeout=60)
    return out.stdout.split()


@pytest.mark.parametrize("name", _names())
def test_cpp(name):
    exe = _binary()
    r = subprocess.run([exe, "--run", name], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
