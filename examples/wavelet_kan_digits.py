"""A wavelet KAN (Wav-KAN's layer on swisk's kernels) on scikit-learn's digits, one model per wavelet:
test accuracy and time per training step. `from swisk.compat.wav_kan import KAN` is Wav-KAN's import.
The default wavelets learn these settings; morlet (cos 5x, fast oscillation) and meyer need other
learning rates and scales, as in Wav-KAN itself.

    python examples/wavelet_kan_digits.py [--epochs 30] [--wavelet dog --wavelet shannon ...]
"""
from __future__ import annotations

import argparse

import torch

from swisk.compat.wav_kan import KAN

import digits_data

WAVELETS = ("mexican_hat", "morlet", "dog", "meyer", "shannon")
DEFAULT = ("mexican_hat", "dog", "shannon")


def train(epochs: int = 30, wavelets=DEFAULT, widths=(64, 32, 10), batch: int = 64, lr: float = 1e-2,
          n_train: int = 1400, seed: int = 0, verbose: bool = True) -> dict:
    data = digits_data.load(n_train, seed)
    out = {}
    for wavelet in wavelets:
        torch.manual_seed(seed)
        net = KAN(list(widths), wavelet_type=wavelet)
        if verbose:
            print(f"-- {wavelet}")
        out[wavelet] = digits_data.fit_and_score(wavelet, net, data, epochs, batch, lr, verbose)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--wavelet", action="append", choices=WAVELETS)
    a = p.parse_args()
    train(a.epochs, tuple(a.wavelet or DEFAULT))
