"""One description per op: `define(OpSpec(...))` registers torch.ops.swisk.<name> (schema, device
kernels, fake kernel, autograd, autocast, vmap) and returns the public wrapper. Every op runs through
the same glue: C++ prepares the call (validation, output shapes, scratch), Python allocates, C++
launches; Metal dispatches come back and are bound here, for MPS and metal-emu alike."""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import torch

from .. import _backend

LIB = torch.library.Library("swisk", "DEF")  # noqa: TOR901  (ops defined once, at import)
DEVICE_KEYS = ("CPU", "CUDA", "MPS")
_SCHEMA_TYPES = {int: "int", str: "str", bool: "bool", float: "float"}
_CACHE_LIMIT = 512
_ARTICLE = {int: "an int", str: "a str", bool: "a bool", float: "a float"}


@dataclasses.dataclass
class OpSpec:
    """What an op is. inputs: tensor names, "name?" for an optional one (None allowed); scalars:
    (name, type) pairs after the tensors; outputs: output names (one tensor or a tuple)."""
    name: str
    inputs: tuple
    scalars: tuple
    outputs: tuple
    prepare: Callable                      # _C.<name>_prepare(*views, *scalars, *extra, backend)
    fake_shapes: Callable                  # (*args) -> output shapes, for symbolic sizes
    backward: Optional[Callable] = None    # (ctx, saved inputs, scalars, grads) -> input grads
    extra: Optional[Callable] = None       # () -> extra prepare arguments read at call time
    autocast: Optional[str] = None         # "fp32": cast floating inputs up; "lower": to the autocast dtype
    row_outputs: tuple = ()                # outputs with x's leading (row) dims: the vmap rule merges those
    defaults: dict = dataclasses.field(default_factory=dict)  # public wrapper's trailing defaults
    doc: str = ""

    @property
    def n_in(self) -> int:
        return len(self.inputs)

    def input_names(self):
        return [n.rstrip("?") for n in self.inputs]


def _schema(spec: OpSpec) -> str:
    args = [f"Tensor{'?' if n.endswith('?') else ''} {n.rstrip('?')}" for n in spec.inputs]
    args += [f"{_SCHEMA_TYPES[t]} {n}" for n, t in spec.scalars]
    outs = ", ".join("Tensor" for _ in spec.outputs)
    return f"{spec.name}({', '.join(args)}) -> {outs if len(spec.outputs) == 1 else '(' + outs + ')'}"


def _meta(t):
    return None if t is None else (t.dtype, t.device, t.shape, t.stride())


class _Prepared:
    """Prepared calls, cached on everything prepare reads (dtypes, devices, shapes, strides, scalars):
    a repeated call costs one dictionary lookup instead of a validation crossing."""

    def __init__(self, spec: OpSpec):
        self.spec, self.cache = spec, {}

    def get(self, tensors, scalars, backend: str, data: bool = True):
        extra = self.spec.extra() if self.spec.extra else ()
        key = (backend, scalars, extra, *map(_meta, tensors))
        call = self.cache.get(key)
        if call is None:
            names = self.spec.input_names()
            views = [None if t is None else _backend.view(self.spec.name, n, t, False) for n, t in zip(names, tensors)]
            call = self.spec.prepare(*views, *scalars, *extra, backend)
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()
            self.cache[key] = call
        return call


def _run(spec: OpSpec, prepared: _Prepared, args):
    tensors = _contiguous(args[:spec.n_in])
    x = tensors[0]
    backend = _backend.backend_for(x)
    call = prepared.get(tensors, tuple(args[spec.n_in:]), backend)
    dtype, device = x.dtype, x.device
    outs = [(torch.zeros if z else torch.empty)(s, dtype=dtype, device=device)
            for s, z in zip(call.outputs, call.zero_outputs)]
    everything = tensors + outs
    if call.has_work:
        wd = _backend.dtype_of_code(call.work_dtype)
        everything.append(torch.empty(call.work, dtype=wd, device=device) if call.work else None)
    dispatches = call.launch([0 if t is None else t.data_ptr() for t in everything], _backend.stream_for(x))
    if dispatches:
        _backend.run_metal_dispatches(dispatches, everything, backend)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _contiguous(tensors):
    return [t if t is None or t.is_contiguous() else t.contiguous() for t in tensors]


def _fake(spec: OpSpec, prepared: _Prepared, args):
    tensors = _contiguous(args[:spec.n_in])  # as the real kernel sees them
    x = tensors[0]
    if all(isinstance(s, int) for t in tensors if t is not None for s in t.shape):
        shapes = prepared.get(tensors, tuple(args[spec.n_in:]), _backend.backend_for(x)).outputs
    else:
        shapes = spec.fake_shapes(*args)
    outs = [x.new_empty(s) for s in shapes]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _autograd(spec: OpSpec, op):
    """The Autograd kernel: an autograd.Function when a tensor input needs a gradient, else straight
    below autograd (no Function overhead on inference calls)."""
    n_in = spec.n_in

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            with torch._C._AutoDispatchBelowAutograd():
                out = op(*args)
            ctx.save_for_backward(*args[:n_in])
            ctx.scalars = args[n_in:]
            return out

        @staticmethod
        def backward(ctx, *grads):
            grads_in = spec.backward(ctx, ctx.saved_tensors, ctx.scalars, grads)
            return (*grads_in, *(None for _ in ctx.scalars))

    Fn.__name__ = f"{spec.name}_fn"

    def kernel(*args):
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in args[:n_in]):
            return Fn.apply(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)

    return kernel


def _vmap_rule(spec: OpSpec, op):
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


def define(spec: OpSpec):
    """Registers torch.ops.swisk.<name> from its description; returns the OpOverload."""
    LIB.define(_schema(spec))
    op = getattr(torch.ops.swisk, spec.name).default
    prepared = _Prepared(spec)

    def impl(*args):
        return _run(spec, prepared, args)

    for key in DEVICE_KEYS:
        LIB.impl(spec.name, impl, key)
    torch.library.register_fake(f"swisk::{spec.name}", lambda *args: _fake(spec, prepared, args), lib=LIB)
    if spec.backward is not None:
        LIB.impl(spec.name, _autograd(spec, op), "Autograd")
    if spec.autocast == "fp32":
        for dev in ("cpu", "cuda", "mps"):
            if torch.amp.is_autocast_available(dev):
                torch.library.register_autocast(f"swisk::{spec.name}", dev, torch.float32, lib=LIB)
    torch.library.register_vmap(f"swisk::{spec.name}", _vmap_rule(spec, op), lib=LIB)
    op._swisk_spec = spec
    return op


def wrapper(spec: OpSpec, op):
    """The public function, with the op's signature and defaults: argument types checked (naming the op
    and the argument), autocast applied, then the op."""
    names, n_in = spec.input_names(), spec.n_in
    optional = [n.endswith("?") for n in spec.inputs]
    scalar_types = [t for _, t in spec.scalars]

    def check(*args):
        for i in range(n_in):
            a = args[i]
            if not isinstance(a, torch.Tensor) and not (a is None and optional[i]):
                raise TypeError(f"[{spec.name}] {names[i]}: expected a torch.Tensor, got {type(a).__name__}")
        for (name, typ), a in zip(spec.scalars, args[n_in:]):
            if not isinstance(a, typ) or (typ is int and isinstance(a, bool)):
                raise TypeError(f"[{spec.name}] {name}: expected {_ARTICLE[typ]}, got {type(a).__name__}")
        if spec.autocast == "lower":
            dev = args[0].device.type
            if torch.is_autocast_enabled(dev) and args[0].is_floating_point():
                dt = torch.get_autocast_dtype(dev)
                args = (*(None if t is None else t.to(dt) for t in args[:n_in]), *args[n_in:])
        return op(*args)

    del scalar_types
    all_names = names + [n for n, _ in spec.scalars]
    params = ", ".join(f"{n}={spec.defaults[n]!r}" if n in spec.defaults else n for n in all_names)
    src = f"def {spec.name}({params}):\n    return _check({', '.join(all_names)})\n"
    scope = {"_check": check}
    exec(src, scope)  # a real signature (help(), inspect, keywords) at the cost of one call
    fn = scope[spec.name]
    fn.__doc__ = spec.doc
    fn.__module__ = "swisk.ops"
    return fn
