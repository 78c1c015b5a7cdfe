"""A small KAN conv net (torch-conv-kan's KANConv2DLayer, from swisk.compat) on scikit-learn's bundled
8×8 digits, then the same net in torch-conv-kan's own formulation (swisk.reference.torch_conv_kan, the
same weights) against swisk's: time per training step and peak tensor memory of one step.

    python examples/digits_kan_conv.py [--epochs 15] [--threads 2]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import time

import torch
import torch.nn as nn

import swisk
from swisk.compat import torch_conv_kan

try:  # a progress bar where tqdm is installed (pip install "swisk[progress]")
    from tqdm import tqdm
except ImportError:
    tqdm = None
from swisk.reference import torch_conv_kan as torch_conv_kan_ref


def make_net(layers=torch_conv_kan, widths=(8, 16), grid_size=5) -> nn.Module:
    """KAN conv (1 -> w0), max-pool, KAN conv (w0 -> w1), max-pool, linear head: 8×8 -> 2×2 -> 10."""
    conv = layers.KANConv2DLayer
    return nn.Sequential(conv(1, widths[0], 3, padding=1, grid_size=grid_size), nn.MaxPool2d(2),
                         conv(widths[0], widths[1], 3, padding=1, grid_size=grid_size), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * widths[1], 10))


def load_data(seed: int = 0, n_train: int | None = None):
    """(x_train, y_train, x_test, y_test): pixels scaled to [-1, 1] (the layers' grid_range), 20% held out."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 8 - 1
    y = torch.tensor(digits.target)
    idx_train, idx_test = train_test_split(range(len(y)), test_size=0.2, random_state=seed, stratify=digits.target)
    idx_train = idx_train[:n_train]
    return x[idx_train], y[idx_train], x[idx_test], y[idx_test]


def train_step(net, opt, x, y):
    loss = nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


@contextlib.contextmanager
def _quiet_stderr():
    """The profiler's start/stop notes go to fd 2 from C++; keep the table readable."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def peak_step_memory(net, x, y) -> float:
    """Peak tensor memory held during one training step above what was held at its start, in MiB, from
    torch.profiler's allocation events (everything through torch's allocator, swisk's workspace tiles
    included; frees of older tensors, e.g. the previous gradients, count against it)."""
    from torch.profiler import ProfilerActivity, profile

    opt = torch.optim.Adam(net.parameters(), lr=0.0)
    train_step(net, opt, x, y)  # Adam's state exists before the measured step
    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_step(net, opt, x, y)
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    held = peak = 0
    for e in events:
        held += e.nbytes()
        peak = max(peak, held)
    return peak / 2**20


def step_times(models, x, y, steps: int, rounds: int = 3) -> list:
    """Seconds per training step (forward, backward, Adam) of each (model, workspace_bytes): the best of
    `rounds` interleaved rounds of `steps` steps, after two warm-up steps (the machine may be shared)."""
    opts = [torch.optim.Adam(m.parameters(), lr=0.0) for m, _ in models]
    best = [float("inf")] * len(models)
    for r in range(rounds):
        for i, ((model, workspace), opt) in enumerate(zip(models, opts)):
            with _workspace(workspace):
                for _ in range(2 if r == 0 else 0):
                    train_step(model, opt, x, y)
                start = time.perf_counter()
                for _ in range(steps):
                    train_step(model, opt, x, y)
                best[i] = min(best[i], (time.perf_counter() - start) / steps)
    return best


def _workspace(workspace):
    return contextlib.nullcontext() if workspace is None else swisk.config.using(workspace_bytes=workspace)


def compare(net, x, y, batches=(32, 512), steps: int = 10, verbose: bool = True) -> list:
    """The net in torch-conv-kan's formulation (the oracle, net's weights: before) against swisk (after,
    with swisk's default workspace and with a 1 MiB one): ms per training step and peak MiB of one step."""
    ref = make_net(torch_conv_kan_ref, (net[0].outdim, net[2].outdim), net[0].grid_size)
    ref.load_state_dict(net.state_dict())
    models = {"torch-conv-kan": (ref.train(), None), "swisk": (net.train(), None),
              "swisk, 1 MiB workspace": (net, 1 << 20)}
    rows = []
    for b in batches:
        xb, yb = x[:b], y[:b]
        times = step_times(list(models.values()), xb, yb, steps)
        for (name, (model, workspace)), t in zip(models.items(), times):
            with _workspace(workspace):
                rows.append({"batch": len(xb), "model": name, "ms_per_step": 1e3 * t,
                             "peak_mib": peak_step_memory(model, xb, yb)})
    if verbose:
        print(f"\none training step (forward, backward, Adam), {torch.get_num_threads()} threads; time: best of "
              f"3 rounds of {steps} steps;\npeak: tensor memory held above the step's start (torch.profiler's allocation "
              f"events); speedup and memory relative to torch-conv-kan")
        print(f"{'batch':>5s}  {'model':24s}{'ms/step':>9s}{'peak MiB':>10s}{'speedup':>9s}{'memory':>8s}")
        for r in rows:
            before = next(q for q in rows if q["batch"] == r["batch"] and q["model"] == "torch-conv-kan")
            print(f"{r['batch']:5d}  {r['model']:24s}{r['ms_per_step']:9.2f}{r['peak_mib']:10.2f}"
                  f"{before['ms_per_step'] / r['ms_per_step']:8.2f}x{r['peak_mib'] / before['peak_mib']:7.2f}x")
    return rows


def train(epochs: int = 15, batch: int = 32, lr: float = 3e-3, widths=(8, 16), grid_size: int = 5,
          n_train: int | None = None, threads: int | None = 2, seed: int = 0, compare_batches=(32, 512),
          compare_steps: int = 10, verbose: bool = True) -> dict:
    """Train on the digits; returns test accuracy, per-epoch mean losses, training seconds and the
    comparison rows (compare_batches=() skips the comparison)."""
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        torch.manual_seed(seed)
        x_tr, y_tr, x_te, y_te = load_data(seed, n_train)
        net = make_net(torch_conv_kan, widths, grid_size)
        opt = torch.optim.Adam(net.parameters(), lr=lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
        losses = []
        start = time.perf_counter()
        bar = tqdm(range(epochs), desc="epochs", disable=not verbose) if tqdm else range(epochs)
        for _ in bar:
            net.train()
            total = 0.0
            for idx in torch.randperm(len(y_tr)).split(batch):
                total += train_step(net, opt, x_tr[idx], y_tr[idx]).item() * len(idx)
            sched.step()
            losses.append(total / len(y_tr))
            if tqdm:
                bar.set_postfix(loss=f"{losses[-1]:.4f}")
        seconds = time.perf_counter() - start
        net.eval()
        with torch.no_grad():
            accuracy = (net(x_te).argmax(1) == y_te).float().mean().item()
        if verbose:
            print(f"test accuracy {accuracy:.4f} ({len(y_te)} images), training {seconds:.1f} s")
        rows = compare(net, x_tr, y_tr, compare_batches, compare_steps, verbose) if compare_batches else []
        return {"accuracy": accuracy, "losses": losses, "seconds": seconds, "compare": rows}
    finally:
        torch.set_num_threads(previous)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    train(args.epochs, threads=args.threads)
