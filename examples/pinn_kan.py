"""A physics-informed KAN: fit u'' = f on [-1, 1] with u(-1) = u(1) = 0, the second derivative of the
network in the loss. With f = -pi^2 sin(pi x) the solution is u = sin(pi x).

    python examples/pinn_kan.py [--steps 2000]
"""
from __future__ import annotations

import argparse
import math

import torch

import swisk


def train(steps: int = 2000, seed: int = 0, verbose: bool = True) -> dict:
    torch.manual_seed(seed)
    net = swisk.nn.KAN([1, 8, 1], grid_size=8, spline_order=3, grid_range=[-1, 1])
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    f = -(math.pi ** 2) * torch.sin(math.pi * x)
    ends = torch.tensor([[-1.0], [1.0]])
    losses = []
    for step in range(steps):
        xr = x.clone().requires_grad_()
        u = net(xr)
        (du,) = torch.autograd.grad(u.sum(), xr, create_graph=True)
        (d2u,) = torch.autograd.grad(du.sum(), xr, create_graph=True)  # through swisk's ops
        loss = (d2u - f).square().mean() + 100 * net(ends).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if verbose and (step % max(1, steps // 10) == 0 or step == steps - 1):
            print(f"step {step:5d}  loss {loss.item():.4e}")
    with torch.no_grad():
        err = (net(x) - torch.sin(math.pi * x)).abs().max().item()
    if verbose:
        print(f"max |u - sin(pi x)| on the grid: {err:.3e}")
    return {"losses": losses, "max_error": err}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2000)
    train(p.parse_args().steps)
