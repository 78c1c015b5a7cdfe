"""Derivatives the kernels do not compute yet, taken exactly from the op's differentiable formulation
(its `derivatives` in the description, else its plain-torch `reference`): the backward of the backward ops (double backward, gradient
penalties, PINN-style second derivatives) and forward-mode tangents (jvp, jacfwd, hessian).
These build what the formulation builds (for kan_linear the (batch, in, n_basis) basis tensor), as
efficient-kan does; the kernels' first-order paths stay as they are."""
from __future__ import annotations

import torch


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def vjp(spec, need, saved, scalars, grads):
    """Input gradients of the op for the output gradients `grads` (torch.func.vjp over the
    formulation: differentiable in turn under autograd's create_graph and under torch.func)."""
    diff = [i for i, t in enumerate(saved) if i < len(need) and need[i] and t is not None]
    if not diff:
        return tuple(None for _ in saved)

    def f(*moving):
        ins = list(saved)
        for i, m in zip(diff, moving):
            ins[i] = m
        return _as_tuple((spec.derivatives or spec.reference)(*ins, *scalars))

    outs, pull = torch.func.vjp(f, *(saved[i] for i in diff))
    cot = tuple(torch.zeros_like(o) if g is None else g for o, g in zip(outs, grads))
    res = pull(cot)
    out = [None] * len(saved)
    for i, r in zip(diff, res):
        out[i] = r
    return tuple(out)


def jvp(spec, primals, scalars, tangents):
    """Output tangents J·t of the op at `primals` (inputs without a tangent held constant): under
    torch.func by its jvp over the formulation; under torch.autograd.forward_ad (which does not nest)
    as the derivative in u of the vector-Jacobian product, linear in u (two reverse passes)."""
    diff = [i for i, (p, t) in enumerate(zip(primals, tangents))
            if p is not None and t is not None and p.is_floating_point()]
    primals = [None if p is None else p.contiguous() for p in primals]  # duals of expanded views fail

    def f(*moving):
        ins = list(primals)
        for i, m in zip(diff, moving):
            ins[i] = m
        return _as_tuple((spec.derivatives or spec.reference)(*ins, *scalars))

    if not diff:
        return _single([torch.zeros_like(o) for o in f()])
    moving, tans = tuple(primals[i] for i in diff), tuple(tangents[i].contiguous() for i in diff)
    if torch._C._are_functorch_transforms_active():
        return _single(list(torch.func.jvp(f, moving, tans)[1]))
    with torch.enable_grad():
        leaves = [m.detach().requires_grad_() for m in moving]
        outs = f(*leaves)
        us = [torch.zeros_like(o, requires_grad=True) for o in outs]
        gs = torch.autograd.grad(outs, leaves, us, create_graph=True, allow_unused=True)
        dot = sum((g * t).sum() for g, t in zip(gs, tans) if g is not None)
        jv = torch.autograd.grad(dot, us, allow_unused=True) if torch.is_tensor(dot) and dot.requires_grad \
            else [None] * len(us)
    return _single([torch.zeros_like(o) if j is None else j for o, j in zip(outs, jv)])


def nested_forward() -> bool:
    """Whether a forward-mode transform runs inside another (jvp of jvp, jacfwd of jacfwd). torch runs a
    custom Function's jvp with forward gradients off, so the outer level would see a constant tangent:
    there the op runs as its formulation, which every transform composes through."""
    if not torch._C._are_functorch_transforms_active():
        return False
    from torch._C._functorch import TransformType
    from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters
    return sum(i.key() == TransformType.Jvp for i in retrieve_all_functorch_interpreters()) >= 2


def direct(spec, args):
    """The op's outputs from its differentiable formulation (args: the op's tensors and scalars)."""
    return (spec.derivatives or spec.reference)(*args)


def _single(outs):
    return outs[0] if len(outs) == 1 else tuple(outs)
