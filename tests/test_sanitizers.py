"""The C++ tests under AddressSanitizer+UBSan and ThreadSanitizer (scripts/sanitize.sh).

Slow (two extra builds): runs only when SWISK_SANITIZER_TESTS=1.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    os.environ.get("SWISK_SANITIZER_TESTS") != "1", reason="set SWISK_SANITIZER_TESTS=1 to build and run the sanitizers"
)


@pytest.mark.parametrize("kind", ["address", "thread"])
def test_cpp_tests_clean_under_sanitizer(kind):
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed")
    env = dict(os.environ, Python_EXECUTABLE=sys.executable)
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "sanitize.sh"), kind], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, f"sanitize.sh {kind} failed ({r.returncode}):\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
    assert "passed, 0 failed" in r.stdout
    assert "WARNING: ThreadSanitizer" not in r.stderr and "ERROR: AddressSanitizer" not in r.stderr
