"""python -m swisk bench: every op against its swisk.reference formulation (time, peak memory)."""
from __future__ import annotations

import importlib

# One module per op family, each with a CASES list (see cases.Case).
FAMILIES = ["spline", "wavelet"]


def all_cases() -> list:
    out = []
    for fam in FAMILIES:
        out.extend(importlib.import_module(f"{__name__}.{fam}").CASES)
    return out
