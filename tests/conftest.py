import os

import pytest
import torch

import swisk
from swisk import testing

BACKENDS = testing.backend_ids()

# fp32 is checked as fp32: cuDNN's convolutions run as TF32 by torch's default (matmuls do not), 1e-3 off
# for the shapes where cuDNN picks a TF32 algorithm (kan_conv3d on an H200). Tests of TF32 set it.
torch.backends.cudnn.allow_tf32 = False

# Error bounds per dtype: max |op - reference| over values of order one.
TOL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Each backend id present here: cpu, cuda-emu, metal-emu (+ cuda, mps on such machines)."""
    with testing.backend(request.param):
        yield request.param


@pytest.fixture(autouse=True)
def _no_leaked_torch_state():
    """Every test leaves torch's global switches as it found them (restored, then reported)."""
    before = testing.global_flags()
    yield
    after = testing.global_flags()
    leaked = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    for path, name in testing.GLOBAL_FLAGS:
        key = f"{path}.{name}"
        if key in leaked:
            setattr(testing._owner(path), name, before[key])
    torch.set_default_dtype(before["default_dtype"])
    torch.set_grad_enabled(before["grad_enabled"])
    torch.set_float32_matmul_precision(before["float32_matmul_precision"])
    assert not leaked, f"the test leaked global torch state (before, after): {leaked}"


@pytest.fixture(params=["fused", "gemm"])
def route(request):
    """kan_linear's two routes: swisk's fused kernels and the vendor GEMM over generated tiles."""
    with swisk.config.using(kan_route=request.param):
        yield request.param


@pytest.fixture(autouse=True)
def _no_leaked_settings():
    config = swisk.config
    before = dict(config._base), list(config._blocks)
    yield
    leaked = (dict(config._base), list(config._blocks)) != before
    config._base.update(before[0])
    config._blocks[:] = before[1]
    config._changed()
    assert not leaked, "the test leaked swisk.config settings"


@pytest.fixture
def rng():
    """A fresh generator per test, seeded from the OS: inputs differ on every run. The seed is printed
    (pytest shows it beside a failure); SWISK_TEST_SEED=<seed> replays it."""
    seed = int(os.environ.get("SWISK_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
    print(f"rng seed: {seed} (replay: SWISK_TEST_SEED={seed})")
    return torch.Generator().manual_seed(seed)


def pytest_report_header(config):
    return f"swisk {swisk.__version__}: backends {BACKENDS}, build {swisk.build_info()}"


@pytest.fixture(scope="session")
def digits():
    """scikit-learn's digits (8x8 images, 10 classes), features standardised: (x fp64, labels)."""
    datasets = pytest.importorskip("sklearn.datasets")
    preprocessing = pytest.importorskip("sklearn.preprocessing")
    d = datasets.load_digits()
    x = preprocessing.StandardScaler().fit_transform(d.data)
    return torch.from_numpy(x), torch.from_numpy(d.target).long()
