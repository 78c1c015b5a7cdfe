"""Benchmark rows of the sketched layers: swisk.ops.sketched_linear (two GEMMs through the (batch, 2·T·r)
intermediate) and sketched_conv2d (two vendor convolutions) against Panther's formulations."""
from __future__ import annotations

import warnings

import torch

from .. import ops, reference
from .cases import Case

_ARGS = ("x", "S1s", "S2s", "U1s", "U2s", "bias")


def _setup(batch, fin, fout, t, r):
    def setup(device, dtype, gen):
        f64 = dict(generator=gen, dtype=torch.float64)
        sign = lambda m, n: torch.sign(torch.rand(t, m, n, **f64) - 0.5) / m ** 0.5  # noqa: E731
        a = {"x": torch.randn(batch, fin, **f64), "S1s": torch.randn(t, fin, r, **f64) / fin ** 0.5,
             "S2s": torch.randn(t, r, fout, **f64) / r ** 0.5, "U1s": sign(r, fout),
             "U2s": sign(r, fin).transpose(1, 2).contiguous(), "bias": torch.randn(fout, **f64)}
        a = {k: v.to(device, dtype) for k, v in a.items()}
        for k in ("x", "S1s", "S2s", "bias"):
            a[k].requires_grad_()
        return a
    return setup


def _case(batch, fin, fout, t, r, quick=True):
    flops = 2.0 * batch * 2 * t * r * (fin + fout)
    return Case("sketched_linear", f"b{batch} {fin}->{fout} T={t} r={r}", _setup(batch, fin, fout, t, r),
                run=lambda a: ops.sketched_linear(*(a[k] for k in _ARGS)),
                reference=lambda a: reference.sketched_linear(*(a[k] for k in _ARGS)),
                grads=("x", "S1s", "S2s", "bias"), flops=flops,
                goal="CPU: fwd+bwd >= 1.5x Panther's formulation",
                targets=("cpu: fwdbwd_speedup >= 1.5",), quick=quick)


# b4096: a batch where the layer's matrix W takes fewer products than the factors (ops/sketched.py)
CASES = [_case(256, 2048, 1024, 8, 128), _case(256, 1024, 512, 6, 96), _case(4096, 2048, 1024, 8, 128, quick=False)]


def _srht_setup(batch, fin, fout, t, r):
    def setup(device, dtype, gen):
        a = _setup(batch, fin, fout, t, r)(device, dtype, gen)
        a["seed"] = int(torch.randint(0, 2**62, (), generator=gen))
        a["U1s"], a["U2s"] = ops.srht_sketched_operators(t, r, fin, fout, a["seed"], dtype, device)
        return a
    return setup


def _srht_case(batch, fin, fout, t, r):
    """The layer with seeded SRHT operators (never materialised: x·U2 and z·U1 are FWHTs) against Panther's
    formulation with the same operators stored, as Panther holds its U1s/U2s."""
    return Case("sketched_linear", f"b{batch} {fin}->{fout} T={t} r={r} srht operators",
                _srht_setup(batch, fin, fout, t, r),
                run=lambda a: ops.srht_sketched_linear(a["x"], a["S1s"], a["S2s"], a["seed"], a["bias"]),
                reference=lambda a: reference.sketched_linear(*(a[k] for k in _ARGS)),
                grads=("x", "S1s", "S2s", "bias"), flops=2.0 * batch * 2 * t * r * (fin + fout),
                goal="CPU: fwd+bwd >= 1.5x Panther's formulation",
                targets=("cpu: fwdbwd_speedup >= 1.5",))


CASES += [_srht_case(256, 2048, 1024, 8, 128), _srht_case(256, 1024, 512, 6, 96)]


def _conv_setup(batch, c, o, size, t, r):
    def setup(device, dtype, gen):
        f64 = dict(generator=gen, dtype=torch.float64)
        a = {"x": torch.randn(batch, c, size, size, **f64),
             "S1s": torch.randn(2 * t * r, c, 3, 3, **f64) / (9 * c) ** 0.5,
             "U1s": torch.sign(torch.rand(2 * t, r, o, **f64) - 0.5) / r ** 0.5, "bias": torch.randn(o, **f64)}
        a = {k: v.to(device, dtype) for k, v in a.items()}
        for k in ("x", "S1s", "bias"):
            a[k].requires_grad_()
        return a
    return setup


_CONV_ARGS = ("x", "S1s", "U1s", "bias")
CASES.append(Case("sketched_conv2d", "b32 64->64 32x32 T=6 r=8", _conv_setup(32, 64, 64, 32, 6, 8),
                  run=lambda a: ops.sketched_conv2d(*(a[k] for k in _CONV_ARGS), 1, 1),
                  reference=lambda a: reference.sketched_conv2d(*(a[k] for k in _CONV_ARGS), 1, 1),
                  grads=("x", "S1s", "bias"), flops=2.0 * 32 * 32 * 32 * 96 * (64 * 9 + 64),
                  goal="CPU: fwd+bwd >= 1.5x Panther's formulation",
                  targets=("cpu: fwdbwd_speedup >= 1.5",)))


def _layer_setup(batch, fin, fout, t, r):
    def setup(device, dtype, gen):
        from ..nn import SKLinear
        torch.manual_seed(0)
        x = torch.randn(batch, fin, generator=gen, dtype=torch.float64).to(device, dtype).requires_grad_()
        with warnings.catch_warnings():  # Panther's sizes: more parameters than a dense layer, as it warns
            warnings.simplefilter("ignore", UserWarning)
            return {"x": x, "seeded": SKLinear(fin, fout, t, r, seed=1, dtype=dtype, device=device),
                    "stored": SKLinear(fin, fout, t, r, dtype=dtype, device=device)}
    return setup


def _layer_run(name):
    def run(a):
        a[name].zero_grad(set_to_none=True)  # fresh parameter gradients every step, both sides
        return a[name](a["x"])
    return run


# The price of seed=: the seeded layer regenerates its Rademacher U1s/U2s on every forward, the other
# stores them (same sizes, same math).
CASES.append(Case("sketched_linear", "b256 2048->1024 T=8 r=128 seeded vs stored U",
                  _layer_setup(256, 2048, 1024, 8, 128), run=_layer_run("seeded"), reference=_layer_run("stored"),
                  grads=("x",), quick=False,
                  goal="fwd+bwd of the seeded layer >= 0.9x the stored one's",
                  targets=("fwdbwd_speedup >= 0.9",)))


def _dense_setup(batch, fin, fout, t, r):
    def setup(device, dtype, gen):
        from ..nn import SKLinear
        torch.manual_seed(0)
        x = torch.randn(batch, fin, generator=gen, dtype=torch.float64).to(device, dtype).requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            layer = SKLinear(fin, fout, t, r, dtype=dtype, device=device)
        return {"x": x, "layer": layer, "dense": torch.nn.Linear(fin, fout, dtype=dtype, device=device)}
    return setup


def _sizes(a, device):
    """Trainable parameters and stored elements (parameters and buffers) of each side's layer."""
    count = lambda ts: sum(t.numel() for t in ts)  # noqa: E731
    return {f"{side}_{what}": count(ts) for side, m in (("swisk", a["layer"]), ("reference", a["dense"]))
            for what, ts in (("params", [p for p in m.parameters() if p.requires_grad]),
                             ("stored", [*m.parameters(), *m.buffers()]))}


# SKLinear (Panther's default: stored U1s/U2s) against the dense nn.Linear it replaces, at Panther's
# tutorial sizes: speed, peak memory and sizes (these sizes have more parameters than the dense layer).
CASES += [Case("sketched_linear", f"b256 {fin}->{fout} T={t} r={r} SKLinear vs nn.Linear",
               _dense_setup(256, fin, fout, t, r), run=_layer_run("layer"), reference=_layer_run("dense"),
               grads=("x",), quick=False, info=_sizes)
          for fin, fout, t, r in ((2048, 1024, 8, 128), (1024, 512, 6, 96))]
