"""Random valid configurations of the ops on every backend present, against swisk.reference in fp64:
outputs and first gradients of every op; for kan_linear also second derivatives (the gradient of a
gradient penalty) and forward-mode tangents. The suite's tests pin chosen shapes; this walks shapes,
spline orders, knots, routes, workspace sizes (several tiles), leading shapes and flags at random.
Each case draws from its own seed: a mismatch prints the line that replays it. fp32 is checked as fp32:
the run turns off cuDNN's TF32 convolutions (torch's default, ~1e-3 off: 40 of 1,640 cases on an H200
went over the fp32 bound with it on) as the tests do.
usage: python scripts/fuzz_values.py [--cases N | --seconds S] [--seed N] [--backend ID]... [--op NAME]...
       [--case I]   (replays case I of --seed alone)
exit status 1 on any mismatch or error."""
import argparse
import random
import sys
import time

import torch
import torch.autograd.forward_ad as fwAD

import swisk
from swisk import reference, testing
from swisk._ops import conv_gemm
from swisk.reference import sketch as ref_sketch

WAVELETS = ("mexican_hat", "morlet", "dog", "meyer", "shannon")
CONV_OPS = (swisk.ops.kan_conv1d, swisk.ops.kan_conv2d, swisk.ops.kan_conv3d)


def _err(a, b) -> float:
    """max |a - b| over max(1, max |b|); an absent gradient counts as zeros (torch leaves out those that
    are exactly zero, e.g. in x for spline order 0 without a base branch)."""
    if a is None and b is None:
        return 0.0
    a = torch.zeros_like(b) if a is None else a
    b = torch.zeros_like(a) if b is None else b
    if a.shape != b.shape:
        return float("inf")
    if b.numel() == 0:
        return 0.0
    return ((a.double().cpu() - b.double().cpu()).abs().max() / max(1.0, b.abs().max().item())).item()


def _grads(f, ins, gy=None):
    """f(*ins) and the gradients of <f, gy> in the inputs that require them (gy: drawn when None)."""
    y = f(*ins)
    gy = torch.randn(y.shape, dtype=torch.float64).to(y) if gy is None else gy.to(y)
    req = [t for t in ins if isinstance(t, torch.Tensor) and t.requires_grad]
    # y without a graph (spline order 0 without a base branch, in torch's formulation): zero gradients
    gs = torch.autograd.grad(y, req, gy, allow_unused=True) if req and y.requires_grad else [None] * len(req)
    return [y, *gs], gy


def _fp64(ins):
    return [t.detach().cpu().double().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t
            for t in ins]


def _knots(R, rows, n_knots, dtype, device):
    """Uniform knots on a random interval, or random increasing gaps."""
    if R.random() < 0.5:
        lo, span = R.uniform(-3, 0), R.uniform(0.5, 4)
        g = torch.linspace(lo, lo + span, n_knots, dtype=torch.float64).expand(rows, -1)
    else:
        steps = torch.rand(rows, n_knots, dtype=torch.float64) * 0.5 + 0.05
        g = steps.cumsum(-1) - steps.sum(-1, keepdim=True) / 2
    return g.contiguous().to(device, dtype)


def _flags(R, ts, p=0.8):
    for t in ts:
        if t is not None:
            t.requires_grad_(R.random() < p)
    return ts


# ---- one case per op: (configuration, got, want, bound): the bound over _err for fp32 (fp64: 1e-9), or
# a pair (fp32, fp64) ----------------------------------------------------------------------------------

def case_kan_linear(R, dtype, dev):
    k = R.choice([0, 1, 2, 3, 3, 3, 4, 5, 7, 8, 10])
    nb = R.choice([1, 2, 3, 5, 8, 16, 20]) + k
    fin, fout = R.choice([1, 2, 3, 7, 9, 16, 17, 33, 64]), R.choice([1, 2, 5, 8, 15, 17, 31, 64, 65])
    rows = R.choice([0, 1, 2, 3, 7, 16, 17, 63, 65, 200, 513])
    lead = R.choice([(rows,), (2, rows)]) if rows else (rows,)
    grid = _knots(R, fin, nb + k + 1, dtype, dev)
    x = (torch.rand(*lead, fin, dtype=torch.float64) * 3 - 1.5).to(dev, dtype)
    if R.random() < 0.3 and x.dim() == 2:
        x = x.t().contiguous().t()  # non-contiguous
    bw = None if R.random() < 0.15 else torch.randn(fout, fin, dtype=dtype, device=dev)
    sw = torch.randn(fout, fin, nb, dtype=dtype, device=dev)
    sc = None if R.random() < 0.2 else torch.randn(fout, fin, dtype=dtype, device=dev)
    ins = _flags(R, [x, bw, sw, sc])
    route, ws = R.choice(["auto", "gemm", "fused"]), R.choice([64 << 20, 1 << 12, 1 << 16])
    cfg = dict(k=k, n_basis=nb, fin=fin, fout=fout, lead=lead, base=bw is not None, scaler=sc is not None,
               route=route, workspace_bytes=ws)
    with swisk.config.using(kan_route=route, workspace_bytes=ws):
        got, gy = _grads(lambda *a: swisk.ops.kan_linear(a[0], grid, *a[1:], k), ins)
    want, _ = _grads(lambda *a: reference.kan_linear(a[0], grid.double().cpu(), *a[1:], k), _fp64(ins), gy.cpu())
    return cfg, got, want, 3e-4


def case_kan_second(R, dtype, dev):
    """kan_linear: d/d(inputs) of <d<y, gy>/dx, v> (a gradient penalty), and tangents in every input."""
    k = R.choice([0, 1, 2, 3, 3, 5, 8])
    nb = R.choice([1, 3, 5, 8]) + k
    fin, fout, rows = R.choice([1, 2, 5, 9, 17]), R.choice([1, 3, 8, 17]), R.choice([1, 2, 5, 17, 64, 130])
    grid = _knots(R, fin, nb + k + 1, torch.float64, "cpu")
    x = testing.away_from_knots(torch.rand(rows, fin, dtype=torch.float64) * 3 - 1.5, grid, 1e-3)
    grid, x = grid.to(dev, dtype), x.to(dev, dtype).requires_grad_()
    bw = None if R.random() < 0.2 else torch.randn(fout, fin, dtype=dtype, device=dev).requires_grad_()
    sw = torch.randn(fout, fin, nb, dtype=dtype, device=dev).requires_grad_()
    sc = None if R.random() < 0.2 else torch.randn(fout, fin, dtype=dtype, device=dev).requires_grad_()
    gy, v = torch.randn(rows, fout, dtype=torch.float64), torch.randn(rows, fin, dtype=torch.float64)
    tangents = [None if t is None else torch.randn(t.shape, dtype=torch.float64) for t in (x, bw, sw, sc)]
    route = R.choice(["auto", "gemm", "fused"])

    def second(f, ins):
        y = f(*ins)
        gx, = torch.autograd.grad(y, ins[0], gy.to(y), create_graph=True, allow_unused=True)
        req = [t for t in ins if t is not None]
        if gx is None or not gx.requires_grad:
            return [y, gx] + [None] * len(req)
        return [y, gx, *torch.autograd.grad((gx * v.to(gx)).sum(), req, allow_unused=True)]

    def tangent(f, ins):
        with fwAD.dual_level():
            duals = [None if t is None else fwAD.make_dual(t.detach(), d.to(t)) for t, d in zip(ins, tangents)]
            return fwAD.unpack_dual(f(*duals)).tangent

    ins = [x, bw, sw, sc]
    with swisk.config.using(kan_route=route):
        op = lambda *a: swisk.ops.kan_linear(a[0], grid, *a[1:], k)  # noqa: E731
        got = second(op, ins) + [tangent(op, ins)]
    ref = lambda *a: reference.kan_linear(a[0], grid.double().cpu(), *a[1:], k)  # noqa: E731
    d = _fp64(ins)
    want = second(ref, d) + [tangent(ref, d)]
    cfg = dict(k=k, n_basis=nb, fin=fin, fout=fout, rows=rows, base=bw is not None, scaler=sc is not None,
               route=route)
    return cfg, got, want, 2e-3


def case_wavelet_kan(R, dtype, dev):
    name = R.choice(WAVELETS)
    fin, fout, rows = R.choice([1, 2, 3, 8, 17, 33]), R.choice([1, 2, 5, 16, 17, 40]), R.choice([0, 1, 3, 17, 65, 300])
    lead = R.choice([(rows,), (2, rows)])
    r = lambda *s: torch.randn(*s, dtype=torch.float64)  # noqa: E731
    ins = [r(*lead, fin) * 2, torch.rand(fout, fin, dtype=torch.float64) + 0.3, r(fout, fin), r(fout, fin)]
    ins = _flags(R, [t.to(dev, dtype) for t in ins])
    got, gy = _grads(lambda *a: swisk.ops.wavelet_kan(*a, name), ins)
    want, _ = _grads(lambda *a: reference.wavelet_kan(*a, name), _fp64(ins), gy.cpu())
    return dict(wavelet=name, fin=fin, fout=fout, lead=lead), got, want, 3e-4


def case_kan_conv(R, dtype, dev):
    d, k, g = R.choice([1, 2, 2, 3]), R.choice([0, 1, 2, 3, 5]), R.choice([1, 3, 5])
    groups = R.choice([1, 1, 2])
    c, o = groups * R.randint(1, 3), groups * R.randint(1, 3)
    ks = tuple(R.choice([1, 2, 3]) for _ in range(d))
    size = tuple(R.randint(max(ks) + 2, 9) for _ in range(d))
    n, stride, dil, pad = R.choice([0, 1, 2, 3]), R.choice([1, 2]), R.choice([1, 2]), R.choice([0, 1, 2, "same"])
    stride = 1 if pad == "same" else stride
    pads = [pad] * (2 * d) if pad != "same" else [q for kd in ks for q in (dil * (kd - 1) // 2,
                                                                           dil * (kd - 1) - dil * (kd - 1) // 2)]
    act = R.choice(["silu", "gelu", "identity"])
    merge = R.random() < 0.5  # the base branch in the tiles (the GPUs' default) or its own convolution
    grid = _knots(R, c, g + 2 * k + 1, dtype, dev)
    r = lambda *s: torch.randn(*s, dtype=torch.float64).to(dev, dtype)  # noqa: E731
    bw = None if R.random() < 0.2 else r(o, c // groups, *ks)
    sc = None if R.random() < 0.3 else r(o, c // groups, *ks)
    ins = _flags(R, [r(n, c, *size), bw, r(o, c // groups * (g + k), *ks), sc])
    ws = R.choice([64 << 20, 1 << 12])
    cfg = dict(d=d, k=k, G=g, c=c, o=o, groups=groups, kernel=ks, size=size, n=n, stride=stride, dilation=dil,
               padding=pad, act=act, base=bw is not None, scaler=sc is not None, workspace_bytes=ws, merge=merge)
    before = dict(conv_gemm.MERGE)
    conv_gemm.MERGE[torch.device(dev).type] = merge
    try:
        with swisk.config.using(workspace_bytes=ws):
            got, gy = _grads(lambda x, b, s, q: CONV_OPS[d - 1](x, grid, b, s, q, k, stride, pad, dil, groups, act),
                             ins)
    finally:
        conv_gemm.MERGE.clear()
        conv_gemm.MERGE.update(before)
    want, _ = _grads(lambda x, b, s, q: reference.kan_conv(x, grid.double().cpu(), b, s, q, k, (stride,) * d, pads,
                                                           (dil,) * d, groups, act),
                     _fp64(ins), gy.cpu())
    return cfg, got, want, 3e-4


def case_fwht(R, dtype, dev):
    n = 1 << R.choice([0, 1, 2, 5, 8, 10, 13, 14, 15, 16])
    rows = R.choice([0, 1, 3, 7]) if n >= 1 << 14 else R.choice([0, 1, 2, 5, 33, 100])
    lead = R.choice([(rows,), (2, rows)])
    scale = R.choice([None, 0.5, n ** -0.5])
    x = torch.randn(*lead, n, dtype=torch.float64).to(dev, dtype).requires_grad_()
    got, gy = _grads(lambda a: swisk.ops.fwht(a, scale), [x])
    want, _ = _grads(lambda a: ref_sketch.fwht(a, 1.0 if scale is None else scale), _fp64([x]), gy.cpu())
    return dict(n=n, lead=lead, scale=scale), got, want, 3e-4


def case_sketch(R, dtype, dev):
    kind = R.choice(ref_sketch.SKETCHES + ("srht",))
    n = 1 << R.randint(0, 12) if kind == "srht" else R.choice([1, 2, 3, 8, 17, 64, 100, 1000, 4096])
    k, seed = R.randint(1, n), R.randrange(0, 2 ** 63)
    nnz = R.randint(1, min(k, 64))
    rows = R.choice([0, 1, 3, 17, 64])
    lead = R.choice([(rows,), (2, rows)])
    x = torch.randn(*lead, n, dtype=torch.float64).to(dev, dtype).requires_grad_()
    if kind == "srht":
        op, ref = (lambda a: swisk.ops.srht(a, k, seed)), (lambda a: ref_sketch.srht(a, k, seed))
    else:
        op = lambda a: swisk.ops.sketch(a, kind, k, seed, nnz=nnz)  # noqa: E731
        ref = lambda a: ref_sketch.sketch(a, kind, k, seed, nnz=nnz)  # noqa: E731
    got, gy = _grads(op, [x])
    want, _ = _grads(ref, _fp64([x]), gy.cpu())
    # Gaussian entries come from fp32 Box-Muller in every dtype: the reference's to 2e-6 relative
    bound = (1e-5, 1e-5) if kind == "gaussian" else 3e-4
    return dict(kind=kind, n=n, k=k, nnz=nnz, seed=seed, lead=lead), got, want, bound


def case_sketched_linear(R, dtype, dev):
    t, r = R.randint(1, 4), R.randint(1, 20)
    fin, fout, rows = R.choice([1, 3, 16, 33]), R.choice([1, 5, 16, 31]), R.choice([0, 1, 7, 64, 2000])
    lead = R.choice([(rows,), (2, rows)])
    rn = lambda *s: torch.randn(*s, dtype=torch.float64).to(dev, dtype)  # noqa: E731
    bias = None if R.random() < 0.3 else rn(fout)
    ins = _flags(R, [rn(*lead, fin), rn(t, fin, r), rn(t, r, fout), rn(t, r, fout), rn(t, fin, r), bias], 0.7)
    got, gy = _grads(swisk.ops.sketched_linear, ins)
    want, _ = _grads(reference.sketched_linear, _fp64(ins), gy.cpu())
    return dict(T=t, r=r, fin=fin, fout=fout, lead=lead, bias=bias is not None), got, want, 3e-4


CASES = {"kan_linear": case_kan_linear, "kan_linear_second": case_kan_second, "wavelet_kan": case_wavelet_kan,
         "kan_conv": case_kan_conv, "fwht": case_fwht, "sketch": case_sketch,
         "sketched_linear": case_sketched_linear}


def run_case(seed: int, i: int, backends, ops):
    """Case i of seed: (what ran, its errors or None, None if within the bound else the bound or the
    exception's text)."""
    R = random.Random(f"{seed}/{i}")
    torch.manual_seed(R.randrange(2 ** 62))
    op, be = R.choice(ops), R.choice(backends)
    dtype = R.choice([torch.float64, torch.float32]) if be == "cpu" else torch.float32
    head = dict(op=op, backend=be, dtype=str(dtype).replace("torch.", ""))
    try:
        with testing.backend(be):
            cfg, got, want, bound = CASES[op](R, dtype, testing.device_of(be))
    except Exception as e:  # noqa: BLE001 (every failure is a finding)
        return head, None, f"{type(e).__name__}: {str(e)[:400]}"
    if len(got) != len(want):
        return {**head, **cfg}, None, f"{len(got)} results (output and gradients), the reference {len(want)}"
    bound = bound[dtype == torch.float64] if isinstance(bound, tuple) else (1e-9 if dtype == torch.float64 else bound)
    errs = [_err(a, b) for a, b in zip(got, want)]
    return {**head, **cfg}, errs, None if max(errs, default=0) <= bound else bound


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", type=int, default=None, help="this many cases (default: 200, or --seconds' worth)")
    p.add_argument("--seconds", type=float, default=None, help="cases until this many seconds have passed")
    p.add_argument("--seed", type=int, default=None, help="default: drawn, and printed")
    p.add_argument("--backend", action="append", choices=testing.backend_ids(), help="default: every one present")
    p.add_argument("--op", action="append", choices=list(CASES), help="default: every op")
    p.add_argument("--case", type=int, default=None, help="replay this case of --seed alone")
    a = p.parse_args(argv)
    torch.backends.cudnn.allow_tf32 = False  # fp32 as fp32 (matmuls: torch's default is already off)
    same = "".join(f" --backend {b}" for b in a.backend or []) + "".join(f" --op {o}" for o in a.op or [])
    seed = a.seed if a.seed is not None else random.randrange(2 ** 31)
    backends, ops = a.backend or testing.backend_ids(), a.op or list(CASES)
    print(f"swisk {swisk.__version__}, torch {torch.__version__}: backends {backends}, seed {seed}", flush=True)
    end = time.monotonic() + a.seconds if a.seconds is not None else None
    count = a.cases if a.cases is not None else (None if end else 200)
    indices = [a.case] if a.case is not None else range(sys.maxsize)
    done = bad = 0
    for i in indices:
        if (count is not None and done >= count) or (end is not None and time.monotonic() > end):
            break
        cfg, errs, fail = run_case(seed, i, backends, ops)
        done += 1
        if fail is not None:
            bad += 1
            what = fail if errs is None else f"errors {[f'{e:.1e}' for e in errs]} over the bound {fail:.0e}"
            print(f"FAIL {cfg}: {what}\n  replay: python scripts/fuzz_values.py --seed {seed} --case {i}{same}",
                  flush=True)
    print(f"{done} cases, {bad} failed (seed {seed})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
