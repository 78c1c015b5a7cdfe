"""The API reference: every public function and class documents its arguments, result and errors, and
the Sphinx build of docs/ (from those docstrings) succeeds without a warning and covers the whole API."""
import inspect
import pathlib
import re
import subprocess
import sys

import pytest

import swisk
import swisk.config
import swisk.nn
import swisk.ops

ROOT = pathlib.Path(__file__).resolve().parents[1]


def public_api():
    out = {f"swisk.{n}": getattr(swisk, n) for n in ("build_info", "backends", "default_device")}
    out.update({f"swisk.ops.{n}": getattr(swisk.ops, n) for n in swisk.ops.__all__})
    out.update({f"swisk.nn.{n}": o for n, o in vars(swisk.nn).items() if inspect.isclass(o) and not n.startswith("_")})
    out.update({f"swisk.config.{n}": getattr(swisk.config, n) for n in ("get", "set", "using")})
    return out


@pytest.mark.parametrize("name", sorted(public_api()))
def test_docstring_sections(name):
    obj = public_api()[name]
    doc = inspect.getdoc(obj) or ""
    need = ("Args:", "Raises:") if inspect.isclass(obj) else ("Args:", "Returns:", "Raises:")
    assert all(s in doc for s in need), f"{name}: missing {[s for s in need if s not in doc]}"


def test_docs_build_and_cover_the_api(tmp_path):
    pytest.importorskip("sphinx.cmd.build")  # the runnable package, not a namespace of the name
    r = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-b", "html",
                        str(ROOT / "docs"), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    html = (tmp_path / "api.html").read_text()
    documented = set(re.findall(r'id="(swisk\.[A-Za-z0-9_.]+)"', html))
    missing = sorted(set(public_api()) - documented)
    assert not missing, f"not in docs/api.rst: {missing}"
