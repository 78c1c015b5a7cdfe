"""FlopCounterMode counts swisk's ops: 2 x the dense-equivalent multiply-adds of each contraction (what
the bench reports), once per op whichever route runs inside, forward and backward."""
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import swisk


def flops(fn):
    with FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


@pytest.mark.parametrize("route", ["gemm", "fused"])
def test_kan_linear(rng, route):
    m = swisk.nn.KANLinear(30, 20, grid_size=5, spline_order=3)
    x = torch.randn(10, 30, generator=rng, requires_grad=True)
    fwd = 2 * 10 * 20 * 30 * (8 + 1)
    with swisk.config.using(kan_route=route):
        assert flops(lambda: m(x)) == fwd
        assert flops(lambda: m(x).sum().backward()) == 3 * fwd
        assert flops(lambda: m(x.detach()).sum().backward()) == 2 * fwd  # no grad_x


def test_wavelet_conv_and_sketch_ops(rng):
    w = swisk.nn.WaveletKANLinear(16, 8, batch_norm=False)
    assert flops(lambda: w(torch.randn(32, 16, generator=rng))) == 2 * 32 * 16 * 8
    x = torch.randn(32, 16, generator=rng, requires_grad=True)
    assert flops(lambda: w(x).sum().backward()) == 3 * 2 * 32 * 16 * 8
    c = swisk.nn.KANConv2d(3, 4, 3, padding=1)  # 8 bases + silu per input channel and tap
    assert flops(lambda: c(torch.randn(2, 3, 5, 5, generator=rng))) == 2 * (2 * 4 * 5 * 5) * (3 * 9 * (8 + 1))
    assert flops(lambda: swisk.ops.sketch(torch.randn(4, 100, generator=rng), "gaussian", 10, 3)) == 2 * 4 * 100 * 10
    assert flops(lambda: swisk.ops.fwht(torch.randn(4, 1024, generator=rng), 0.5)) == 4 * 1024 * 10
    assert flops(lambda: swisk.ops.srht(torch.randn(4, 100, generator=rng), 10, 3)) == 4 * 128 * 7
    xs = torch.randn(4, 100, generator=rng, requires_grad=True)
    assert flops(lambda: swisk.ops.sketch(xs, "rademacher", 10, 3).sum().backward()) == 2 * 2 * 4 * 100 * 10
