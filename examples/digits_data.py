"""scikit-learn's bundled digits (8x8 images of 0-9, no download) as standardised fp32 tensors: the
data every example trains on."""
from __future__ import annotations

import torch


def load(n_train: int = 1400, seed: int = 0, images: bool = False):
    """(x_train, y_train, x_test, y_test): features standardised on the training split; images=True
    gives (N, 1, 8, 8) instead of (N, 64)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    x, y = x[perm], y[perm]
    x_tr, x_te = x[:n_train], x[n_train:]
    mean, std = x_tr.mean(0), x_tr.std(0).clamp_min(1e-3)
    x_tr, x_te = (x_tr - mean) / std, (x_te - mean) / std
    if images:
        x_tr, x_te = x_tr.view(-1, 1, 8, 8), x_te.view(-1, 1, 8, 8)
    return x_tr, y[:n_train], x_te, y[n_train:]


def accuracy(net, x, y) -> float:
    net.eval()
    with torch.no_grad():
        out = (net(x).argmax(1) == y).float().mean().item()
    net.train()
    return out


def fit(net, x, y, epochs: int, batch: int = 64, lr: float = 1e-2, verbose: bool = True, opt=None) -> dict:
    """Cross-entropy training with AdamW: per-epoch mean losses and milliseconds per step."""
    import time

    opt = opt or torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    losses, steps, start = [], 0, time.perf_counter()
    for epoch in range(epochs):
        total = 0.0
        for idx in torch.randperm(len(y)).split(batch):
            loss = torch.nn.functional.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            steps += 1
        losses.append(total / len(y))
        if verbose and (epoch % max(1, epochs // 5) == 0 or epoch == epochs - 1):
            print(f"epoch {epoch:3d}  loss {losses[-1]:.4f}")
    return {"losses": losses, "ms_per_step": (time.perf_counter() - start) / max(1, steps) * 1e3}


def fit_and_score(name: str, net, data, epochs: int, batch: int = 64, lr: float = 1e-2, verbose: bool = True) -> dict:
    """fit on the training split, then the test accuracy; prints one summary line when verbose."""
    x_tr, y_tr, x_te, y_te = data
    run = fit(net, x_tr, y_tr, epochs, batch, lr, verbose)
    run["accuracy"] = accuracy(net, x_te, y_te)
    if verbose:
        print(f"{name}: test accuracy {run['accuracy']:.3f}, {run['ms_per_step']:.2f} ms per step")
    return run
