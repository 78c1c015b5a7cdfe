"""scripts/fuzz_values.py: random configurations of the ops on every backend present against the
reference (a few dozen cases per run, from the test's fresh seed), and that a wrong value fails with
the line that replays it."""
import importlib.util
import pathlib
import re

import torch

_PATH = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "fuzz_values.py"


def _fuzz():
    spec = importlib.util.spec_from_file_location("fuzz_values", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_random_configurations_match_the_reference(rng, capsys):
    seed = int(torch.randint(2 ** 31, (1,), generator=rng))
    rc = _fuzz().main(["--cases", "40", "--seed", str(seed)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "40 cases, 0 failed" in out


def test_a_wrong_value_fails_and_replays(capsys):
    fuzz = _fuzz()
    right = fuzz.CASES["fwht"]

    def off_by_a_thousandth(R, dtype, dev):
        cfg, got, want, bound = right(R, dtype, dev)
        return cfg, [got[0] * 1.001 + 1e-3, *got[1:]], want, bound

    fuzz.CASES["fwht"] = off_by_a_thousandth
    assert fuzz.main(["--cases", "3", "--seed", "7", "--op", "fwht"]) == 1
    out = capsys.readouterr().out
    fails = re.findall(r"^FAIL (.*): errors", out, re.M)
    assert len(fails) == 3, out
    case = re.search(r"--seed 7 --case (\d+) --op fwht", out).group(1)
    assert fuzz.main(["--seed", "7", "--case", case, "--op", "fwht"]) == 1  # the same case again
    assert re.findall(r"^FAIL (.*): errors", capsys.readouterr().out, re.M) == [fails[int(case)]]
