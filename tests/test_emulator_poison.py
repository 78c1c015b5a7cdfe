"""On the emulators every fresh output and workspace of an op starts poisoned (NaN, all bits set for
integers): a kernel that leaves an output value unwritten, or reads scratch it did not write, fails the
tests there, as compute-sanitizer's initcheck would flag it on a GPU."""
import torch

import swisk
from swisk import testing
from swisk._ops import run


def test_fresh_outputs_start_poisoned_on_the_emulators(monkeypatch, rng):
    poisoned = []
    real = run._poison

    def spy(tensors):
        real(tensors)
        poisoned.extend(t.clone() for t in tensors if t is not None)

    monkeypatch.setattr(run, "_poison", spy)
    x = torch.randn(3, 64, generator=rng)
    want = swisk.reference.sketch.fwht(x, 0.125)
    for backend in ("cpu", "cuda-emu", "metal-emu"):
        poisoned.clear()
        with testing.backend(backend):
            y = swisk.ops.fwht(x, 0.125)
        assert torch.equal(y, want), backend  # every value written over the poison
        if backend == "cpu":
            assert poisoned == []
        else:
            assert poisoned and all(t.isnan().all() for t in poisoned), backend


def test_poison_sets_every_bit_of_integer_scratch():
    t = [torch.empty(5, dtype=torch.int32), torch.empty(3, dtype=torch.uint8), torch.empty(2), None]
    run._poison(t)
    assert (t[0] == -1).all() and (t[1] == 255).all() and t[2].isnan().all()
