"""A sketched MLP (Panther's SKLinear on swisk for the hidden layers: learned S1s/S2s, fixed random
U1s/U2s) against the same MLP with nn.Linear, on scikit-learn's digits: trained parameters, stored
bytes, accuracy, time per step. With seed=..., U1s/U2s are regenerated from the seed at every forward
instead of stored; with operator="srht" they are seeded Hadamard operators applied through the FWHT.

    python examples/sketched_mlp.py [--epochs 30]
"""
from __future__ import annotations

import argparse
import io

import torch
from torch import nn

from swisk.nn import SKLinear

import digits_data


def mlp(kind: str, hidden: int = 256, num_terms: int = 2, low_rank: int = 16) -> nn.Module:
    if kind == "dense":
        def layer(i, o):
            return nn.Linear(i, o)
    else:
        seeds = iter(range(1, 100)) if kind != "sketched" else None
        operator = "srht" if kind == "sketched, srht" else "rademacher"

        def layer(i, o):
            return SKLinear(i, o, num_terms, low_rank, seed=None if seeds is None else next(seeds), operator=operator)
    return nn.Sequential(nn.Linear(64, hidden), nn.GELU(), layer(hidden, hidden), nn.GELU(), layer(hidden, hidden),
                         nn.GELU(), nn.Linear(hidden, 10))


def stored_bytes(net: nn.Module) -> int:
    buf = io.BytesIO()
    torch.save(net.state_dict(), buf)
    return buf.tell()


def train(epochs: int = 30, batch: int = 64, lr: float = 3e-3, n_train: int = 1400, seed: int = 0,
          verbose: bool = True) -> dict:
    data = digits_data.load(n_train, seed)
    out = {}
    for kind in ("dense", "sketched", "sketched, seeded", "sketched, srht"):
        torch.manual_seed(seed)
        net = mlp(kind)
        params = sum(p.numel() for p in net.parameters() if p.requires_grad)
        if verbose:
            print(f"-- {kind}: {params} trained parameters, state_dict {stored_bytes(net) / 1024:.0f} KiB")
        run = digits_data.fit_and_score(kind, net, data, epochs, batch, lr, verbose)
        run.update(params=params, stored=stored_bytes(net))
        out[kind] = run
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    train(p.parse_args().epochs)
