"""The Autograd and vmap kernels every op gets from its description: an autograd.Function over the
op's kernels (backward op, or the formulation's derivatives), its torch.func form, and the vmap rule."""
from __future__ import annotations

import torch

from torch.autograd import forward_ad as _forward_ad

from . import formulation
from .run import OpSpec, _backward_of_call, _last_call, _Packed, _recorded, _run, _unpacked

_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
# Function.apply's C entry point, without the Python wrapper around it (its default-argument binding is
# for setup_context Functions, its unwrapping for torch.func's tensors): for plain tensors outside any
# transform (define.invoke's plain route), ~20 us less per differentiated call.
_RAW_APPLY = getattr(torch._C, "_FunctionBase", object).__dict__.get("apply")


def autograd_kernel(spec: OpSpec, op):
    """The Autograd kernel: an autograd.Function when a tensor input needs a gradient, else straight
    to the device kernel (no Function overhead on inference calls). Derivatives without a kernel
    (a backward op's own backward, forward mode) come from the op's formulation (formulation.py)."""
    n_in = spec.n_in

    def backward_of(needs, saved, scalars, grads):  # the kernels' backward op, else the formulation's
        if spec.backward is None:
            return formulation.vjp(spec, needs, saved, scalars, grads)
        out = list(spec.backward(needs, saved, scalars, grads))
        # an input the kernels hold constant (the knots) but autograd asks for: the formulation's gradient
        rest = [i for i, g in enumerate(out) if g is None and i < len(needs) and needs[i] and saved[i] is not None]
        if rest:
            extra = formulation.vjp(spec, [i in rest for i in range(len(needs))], saved, scalars, grads)
            for i in rest:
                out[i] = extra[i]
        return tuple(out)

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, keyset, *args):
            # keyset None: called from the public wrapper on plain eager tensors (no dispatcher)
            if keyset is None:
                out = _recorded(_run, spec, op._swisk_prepared, args)
            else:
                out = _recorded(op.redispatch, keyset & _AFTER_AUTOGRAD, *args)
            ctx.save_for_backward(*args[:n_in])
            ctx.scalars, ctx.token = args[n_in:], _last_call()
            return out

        @staticmethod
        def backward(ctx, *grads):
            grads_in = _backward_of_call(ctx.token, backward_of, ctx.needs_input_grad[1:1 + n_in], ctx.saved_tensors,
                                         ctx.scalars, grads)
            return (None, *grads_in, *(None for _ in ctx.scalars))

    Fn.__name__ = f"{spec.name}_fn"
    op._swisk_function = Fn
    op._swisk_apply = _RAW_APPLY.__get__(None, Fn) if _RAW_APPLY is not None else Fn.apply

    class FnT(torch.autograd.Function):
        """The same Function in torch.func's form (setup_context): grad, jacrev, vmap (the op's own vmap
        rule underneath) and forward mode (jvp, jacfwd, hessian) from the formulation."""
        generate_vmap_rule = True

        @staticmethod
        def forward(keyset, *args):
            args = _unpacked(args)
            if keyset is None:
                return _recorded(op, *args)
            return _recorded(op.redispatch, keyset & _AFTER_AUTOGRAD, *args)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs[1:1 + n_in])
            ctx.save_for_forward(*inputs[1:1 + n_in])
            ctx.primals = inputs[1:1 + n_in]
            ctx.scalars = _unpacked(inputs[1 + n_in:])
            ctx.n_rest = len(inputs) - 1 - n_in
            ctx.token = _last_call()  # forward ran just before, in this thread

        @staticmethod
        def backward(ctx, *grads):
            grads_in = _backward_of_call(ctx.token, backward_of, ctx.needs_input_grad[1:1 + n_in], ctx.saved_tensors,
                                         ctx.scalars, grads)
            return (None, *grads_in, *(None for _ in range(ctx.n_rest)))

        @staticmethod
        def jvp(ctx, _keyset, *tangents):
            if spec.jvp is not None:
                return spec.jvp(ctx.primals, ctx.scalars, tangents[:n_in])
            return formulation.jvp(spec, ctx.primals, ctx.scalars, tangents[:n_in])

    FnT.__name__ = f"{spec.name}_func"

    def functorch_apply(keyset, *args):
        """FnT on the op's arguments; int-list scalars travel as one opaque leaf (torch.func would
        flatten a list into several inputs). Forward mode within forward mode: the formulation."""
        if formulation.nested_forward():
            return formulation.direct(spec, args)
        if spec.lists:
            return FnT.apply(keyset, *args[:n_in], _Packed(args[n_in:]))
        return FnT.apply(keyset, *args)

    op._swisk_functorch = functorch_apply

    def kernel(keyset, *args):
        if torch._C._are_functorch_transforms_active():
            return functorch_apply(None, *args)
        if _forward_ad._current_level >= 0:
            return functorch_apply(keyset, *args)
        if torch.is_grad_enabled():
            for t in args[:n_in]:
                if t is not None and t.requires_grad:
                    return Fn.apply(keyset, *args)
        return op.redispatch(keyset & _AFTER_AUTOGRAD, *args)

    return kernel


def vmap_rule(spec: OpSpec, op):
    """Inputs batched only in x (the first input) and outputs all per-row: the vmap dimension becomes a
    leading row dimension (one call). Otherwise one call per vmap index, stacked."""
    n_in = spec.n_in
    rows_only = len(spec.row_outputs) == len(spec.outputs)

    def rule(info, in_dims, *args):
        tensor_dims = in_dims[:n_in]
        if rows_only and all(d is None for d in tensor_dims[1:]) and tensor_dims[0] is not None:
            x = args[0].movedim(tensor_dims[0], 0)
            out = op(x, *args[1:])
            return out, (0 if len(spec.outputs) == 1 else (0,) * len(spec.outputs))
        size = info.batch_size
        per = []
        for b in range(size):
            one = [a if d is None or a is None else a.select(d, b) for a, d in zip(args[:n_in], tensor_dims)]
            per.append(op(*one, *args[n_in:]))
        if len(spec.outputs) == 1:
            return torch.stack(per), 0
        return tuple(torch.stack(o) for o in zip(*per)), (0,) * len(spec.outputs)

    return rule
