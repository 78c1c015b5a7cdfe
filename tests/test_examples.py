"""The examples, run at reduced size."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pinn_trains_through_second_derivatives():
    out = _load("pinn_kan").train(steps=80, verbose=False)
    assert out["losses"][-1] < 0.2 * out["losses"][0], out["losses"][::10]
