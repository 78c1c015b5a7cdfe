"""Switching from efficient-kan is one import line: same constructor, parameter names, initial weights
for a seed and the same numbers, on swisk's kernels. Trains a KAN on scikit-learn's digits and checks
the swisk layer against efficient-kan's formulation (efficient-kan itself where it is installed, else
swisk.reference's plain-torch copy of it).

    python examples/switch_from_efficient_kan.py [--epochs 30]
"""
from __future__ import annotations

import argparse

import torch

# from efficient_kan import KAN             # before
from swisk.compat.efficient_kan import KAN  # after: the only line that changes

import digits_data


def formulation():
    """efficient-kan's KAN class: the package where installed, else swisk.reference's copy."""
    try:
        from efficient_kan import KAN as Theirs
        return Theirs, "efficient-kan"
    except ImportError:
        from swisk.reference.spline import KAN as Theirs
        return Theirs, "swisk.reference (efficient-kan's formulation)"


def train(epochs: int = 30, widths=(64, 32, 10), batch: int = 64, lr: float = 1e-2, n_train: int = 1400,
          seed: int = 0, verbose: bool = True) -> dict:
    x_tr, y_tr, x_te, y_te = digits_data.load(n_train, seed)
    torch.manual_seed(seed)
    net = KAN(list(widths), grid_size=5, spline_order=3)
    Theirs, name = formulation()
    torch.manual_seed(seed)
    theirs = Theirs(list(widths), grid_size=5, spline_order=3)
    init_gap = max((a - b).abs().max().item() for a, b in zip(net.state_dict().values(), theirs.state_dict().values()))
    gap = (net(x_te) - theirs(x_te)).abs().max().item()
    run = digits_data.fit(net, x_tr, y_tr, epochs, batch, lr, verbose)
    losses, ms = run["losses"], run["ms_per_step"]
    acc = digits_data.accuracy(net, x_te, y_te)
    if verbose:
        print(f"against {name}: initial weights within {init_gap:.1e} (the least-squares fit of the"
              f" spline weights rounds differently), outputs within {gap:.1e} (fp32)")
        print(f"test accuracy {acc:.3f}, {ms:.2f} ms per training step (batch {batch})")
    return {"losses": losses, "accuracy": acc, "init_gap": init_gap, "gap": gap, "ms_per_step": ms}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    train(p.parse_args().epochs)
