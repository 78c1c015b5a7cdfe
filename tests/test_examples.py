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


def test_digits_kan_conv_learns_and_compares():
    out = _load("digits_kan_conv").train(epochs=5, n_train=400, widths=(4, 8), lr=2e-2, batch=16,
                                         compare_batches=(16,), compare_steps=2, threads=1, verbose=False)
    assert out["accuracy"] > 0.6, out  # chance is 0.1
    assert out["losses"][-1] < 0.5 * out["losses"][0], out["losses"]
    rows = out["compare"]
    assert [r["model"] for r in rows] == ["torch-conv-kan", "swisk", "swisk, 1 MiB workspace"]
    assert all(r["ms_per_step"] > 0 and r["peak_mib"] > 0 for r in rows)
