"""Random bad input, seeded: each op called with valid arguments changed one or two ways (another dtype,
strides, an extra or missing dimension, a non-finite value, an empty or meta tensor, None, an odd
scalar) on every host backend. Each call either runs (and its backward, when it can) or raises a
ValueError / TypeError naming the op; never another exception or a crash. A call that runs on real,
finite inputs gives its reference formulation's values (in fp64) within its inputs' precision."""
import random

import pytest
import torch

import swisk
from swisk import testing


def _grid(features, g, k):
    h = 2.0 / g
    return (torch.arange(-k, g + k + 1, dtype=torch.float64) * h - 1).expand(features, -1).contiguous().float()


def _case(name, R, T):
    b, i, o = R.choice([0, 1, 2, 7]), R.choice([1, 3, 8]), R.choice([1, 2, 5])
    g, k = R.choice([1, 5]), R.choice([0, 1, 3])
    if name == "kan_linear":
        return [T(b, i), _grid(i, g, k), T(o, i), T(o, i, g + k), T(o, i), k]
    if name == "kan_expand":
        return [T(b, i), _grid(i, g, k), k, R.choice([0, 1, 2]), R.choice([True, False])]
    if name == "bspline_basis":
        return [T(b, i), _grid(i, g, k), k, R.choice([0, 1, 2])]
    if name == "wavelet_kan":
        return [T(b, i), T(o, i).abs() + 0.5, T(o, i), T(o, i), R.choice(["mexican_hat", "morlet", "dog", "meyer"])]
    if name == "fwht":
        return [T(b, R.choice([1, 4, 64]))]
    if name == "sketch":
        n = R.choice([1, 5, 64])
        kk = R.choice([1, 3, n])
        return [T(b, n), R.choice(["gaussian", "rademacher", "sparse_sign", "srht"]), kk, R.randrange(1000),
                R.choice([1, kk])]
    if name == "sketched_linear":
        t, r = R.choice([1, 2]), R.choice([1, 3])
        return [T(b, i), T(t, i, r), T(t, r, o), T(t, r, o), T(t, i, r), T(o)]
    if name == "srht_sketched_linear":
        t, r = R.choice([1, 2]), R.choice([1, 3])
        return [T(b, i), T(t, i, r), T(t, r, o), R.randrange(99), T(o)]
    if name == "kan_conv2d":
        c, oc, ks = R.choice([1, 2]), R.choice([1, 2]), R.choice([1, 3])
        return [T(b, c, 4, 5), _grid(c, g, k), T(oc, c, ks, ks), T(oc, c * (g + k), ks, ks), None, k,
                R.choice([1, 2]), R.choice([0, 1]), 1, 1]
    if name == "sketched_conv2d":
        c, oc, ks, t, r = R.choice([1, 3]), R.choice([1, 4]), R.choice([1, 3]), R.choice([1, 2]), R.choice([1, 2])
        return [T(b, c, 6, 5), T(t, c * ks * ks, r), T(t, r, oc), T(oc), R.choice([1, 2]), R.choice([0, 1])]
    raise KeyError(name)


def _mutate(args, R):
    a = list(args)
    j = R.randrange(len(a))
    v, m = a[j], R.randrange(10)
    if isinstance(v, torch.Tensor):
        if m == 0:
            a[j] = v.to(R.choice([torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.bool]))
        elif m == 1 and v.dim():
            a[j] = v.transpose(0, -1) if v.dim() > 1 else v[::2]
        elif m == 2:
            a[j] = v.unsqueeze(0)
        elif m == 3 and v.dim():
            a[j] = v[..., :max(0, v.shape[-1] - 1)]
        elif m == 4 and v.numel() and v.is_floating_point():
            w = v.detach().clone().contiguous()
            w.view(-1)[R.randrange(v.numel())] = R.choice([float("nan"), float("inf"), -float("inf"), 1e30])
            a[j] = w
        elif m == 5 and v.dim() < 4:
            a[j] = v.expand(2, *v.shape)
        elif m == 6:
            a[j] = torch.empty(0)
        elif m == 7:
            a[j] = v.detach().to("meta")
        elif m == 8 and v.is_floating_point():
            a[j] = v.detach().requires_grad_(True)
        else:
            a[j] = None
    elif isinstance(v, bool):
        a[j] = not v
    elif isinstance(v, int):
        a[j] = R.choice([-1, 0, 1, 7, 40, 2 ** 31, -2 ** 40])
    elif isinstance(v, str):
        a[j] = R.choice(["", "bogus", v.upper()])
    elif v is None:
        a[j] = torch.randn(3)
    return a


REFERENCE = {n: getattr(swisk.reference, n) for n in ("kan_linear", "bspline_basis", "kan_expand", "wavelet_kan",
                                                      "sketched_linear", "srht_sketched_linear")}
_TOL = {torch.float64: 1e-9, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 4e-2}


def _check_values(name, args, out, where):
    """out against the reference on fp64 copies of the same inputs, when they are all real and finite."""
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if name not in REFERENCE or any(t.is_meta or not t.is_floating_point() or not t.isfinite().all() for t in tensors):
        return
    if any(t.numel() and t.abs().max() > 1e3 for t in tensors):  # squares overflow fp32 where fp64 does not
        return                                                  # (the formulation in fp32 gives NaN there too)
    want = REFERENCE[name](*[a.detach().double() if isinstance(a, torch.Tensor) else a for a in args])
    tol = max(_TOL[t.dtype] for t in tensors)
    got = out.detach().double()
    assert got.shape == want.shape, where
    scale = max(1.0, want.abs().max().item()) if want.numel() else 1.0
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * scale, msg=lambda m: f"{where}: {m}")


NAMES = ["kan_linear", "kan_expand", "bspline_basis", "wavelet_kan", "fwht", "sketch", "sketched_linear",
         "srht_sketched_linear", "kan_conv2d", "sketched_conv2d"]


# 1140: kan_conv2d with an empty spatial dimension; 2763: sketched_conv2d with a padding past 2^31
@pytest.mark.parametrize("seed", [*range(8), 1140, 2763])
def test_changed_arguments_run_or_raise_a_named_error(seed):
    R = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)

    def T(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).float()

    for it in range(120):
        name, backend = R.choice(NAMES), R.choice(["cpu", "cuda-emu", "metal-emu"])
        args = _case(name, R, T)
        for _ in range(R.choice([1, 1, 2])):
            args = _mutate(args, R)
        try:
            with testing.backend(backend):
                out = getattr(swisk.ops, name)(*args)
                out = out[0] if isinstance(out, tuple) else out
                _check_values(name, args, out, (seed, it, name, backend))
                if out.requires_grad and out.numel() and not out.is_meta:
                    out.float().sum().backward()
        except (ValueError, TypeError) as e:
            assert f"[{name}]" in str(e), (seed, it, name, backend, str(e))
