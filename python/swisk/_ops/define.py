"""One description per op: `define(OpSpec(...))` registers torch.ops.swisk.<name> (schema, device
kernels, fake kernel, autograd, autocast, vmap); `wrapper(spec, op)` makes its public function. Every op runs through
the same glue: C++ prepares the call (validation, output shapes, scratch), Python allocates, C++
launches; Metal dispatches come back and are bound here, for MPS and metal-emu alike."""
from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Optional

import torch

from torch.autograd import forward_ad as _forward_ad
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .. import _backend
from . import formulation

LIB = torch.library.Library("swisk", "DEF")  # noqa: TOR901  (ops defined once, at import)
DEVICE_KEYS = ("CPU", "CUDA", "MPS")
_SCHEMA_TYPES = {int: "int", str: "str", bool: "bool", float: "float", list: "int[]"}
_CACHE_LIMIT = 512
_ARTICLE = {int: "an int", str: "a str", bool: "a bool", float: "a float", list: "a list of ints"}


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
    reference: Callable                    # the plain-torch formulation (tests, baselines)
    derivatives: Optional[Callable] = None  # differentiable formulation for what the kernels lack
                                            # (default: reference), e.g. one built of swisk ops
    backward: Optional[Callable] = None    # (needs_input_grad, saved inputs, scalars, grads) -> input grads
    jvp: Optional[Callable] = None         # (primals, scalars, tangents) -> output tangents (default: the
                                           # formulation's), e.g. a linear op applied to its tangents
    extra: Optional[Callable] = None       # (backend, tensors, scalars) -> extra prepare arguments
    composite: Optional[Callable] = None   # (tensors, scalars) -> outputs, when prepare validates only
    finish: Optional[Callable] = None      # (tensors, scalars, outputs) -> outputs, after the kernels; it may
                                           # read the device back: under CUDA graph capture the composite runs
    autocast: Optional[str] = None         # "fp32": cast floating inputs up; "lower": to the autocast dtype
    row_outputs: tuple = ()                # outputs with x's leading (row) dims: the vmap rule merges those
    strided: bool = False                  # the composite route reads any strides (no contiguous copies)
    out_like: Optional[Callable] = None    # (x, shape) -> an empty output with the strides the op gives
    defaults: dict = dataclasses.field(default_factory=dict)  # public wrapper's trailing defaults
    doc: str = ""

    @property
    def n_in(self) -> int:
        return len(self.inputs)

    def input_names(self):
        return [n.rstrip("?") for n in self.inputs]

    def __post_init__(self):
        self.lists = tuple(i for i, (_, t) in enumerate(self.scalars) if t is list)


def _scalars(spec: OpSpec, args) -> tuple:
    """The scalar arguments, hashable (int lists as tuples) for the prepared-call cache."""
    scalars = tuple(args[spec.n_in:])
    if spec.lists:
        scalars = tuple(tuple(s) if i in spec.lists else s for i, s in enumerate(scalars))
    return scalars


def _schema(spec: OpSpec) -> str:
    args = [f"Tensor{'?' if n.endswith('?') else ''} {n.rstrip('?')}" for n in spec.inputs]
    args += [f"{_SCHEMA_TYPES[t]} {n}" for n, t in spec.scalars]
    outs = ", ".join("Tensor" for _ in spec.outputs)
    return f"{spec.name}({', '.join(args)}) -> {outs if len(spec.outputs) == 1 else '(' + outs + ')'}"


class _Entry:
    """A prepared call with what Python needs of it read once: output shapes and zero-fill flags,
    the scratch (elements, dtype) or None when the op has none, and the launch."""
    __slots__ = ("call", "outputs", "work", "launch", "plan_only")

    def __init__(self, call):
        self.call = call
        self.plan_only = call.plan_only
        self.outputs = list(zip(call.outputs, call.zero_outputs))
        self.work = (call.work, _backend.dtype_of_code(call.work_dtype)) if call.has_work else None
        self.launch = call.launch


class _Prepared:
    """Prepared calls, cached on everything prepare reads (dtypes, devices, shapes, strides, scalars):
    a repeated call costs one dictionary lookup instead of a validation crossing."""

    def __init__(self, spec: OpSpec):
        self.spec, self.cache = spec, {}

    def get(self, tensors, scalars, backend: str) -> _Entry:
        extra = self.spec.extra(backend, tensors, scalars) if self.spec.extra else ()
        key = (backend, scalars, extra,
               *[None if t is None else (t.dtype, t.device, t.shape, t.stride()) for t in tensors])
        entry = self.cache.get(key)
        if entry is None:
            names = self.spec.input_names()
            views = [None if t is None else _backend.view(self.spec.name, n, t, False) for n, t in zip(names, tensors)]
            try:
                entry = _Entry(self.spec.prepare(*views, *scalars, *extra, backend))
            except TypeError:  # nanobind's own: an int past the C++ parameter's 32 bits
                for (name, typ), v in zip(self.spec.scalars, scalars):
                    if typ in (int, list) and any(not -(1 << 31) <= e < 1 << 31 for e in (v if typ is list else (v,))):
                        raise ValueError(f"[{self.spec.name}] {name}: out of range, got {v}") from None
                raise
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()
            self.cache[key] = entry
        return entry


_EMULATORS = ("cuda-emu", "metal-emu")


def _poison(tensors) -> None:
    """Fills fresh outputs and workspaces on the emulators with NaN (all bits set for integers), so that a
    kernel leaving an output value unwritten, or reading scratch it did not write, fails the tests there."""
    for t in tensors:
        if t is not None and t.numel():
            if t.is_floating_point():
                t.fill_(float("nan"))
            else:
                t.view(torch.uint8).fill_(255)


def _capturing(x) -> bool:
    """Whether x's CUDA stream is being captured into a graph (torch.cuda.graphs, compile's cudagraphs)."""
    return x.device.type == "cuda" and torch.cuda.is_current_stream_capturing()


_SMALL_WORK = 1 << 14  # elements: scratch this small is kept per thread (its allocation costs like a tiny call)
_WORK = threading.local()


def _small_work(n: int, dtype) -> torch.Tensor:
    """A CPU scratch of at least n elements of dtype, kept by this thread for its next call."""
    held = getattr(_WORK, "buffers", None)
    if held is None:
        held = _WORK.buffers = {}
    buf = held.get(dtype)
    if buf is None or buf.numel() < n:
        buf = held[dtype] = torch.empty(_SMALL_WORK, dtype=dtype)
    return buf


def _run(spec: OpSpec, prepared: _Prepared, args, outs=None):
    """Prepare (cached), allocate (or take `outs`: contiguous, of the prepared shapes), launch."""
    tensors = _inputs(spec, args)
    x = tensors[0]
    backend = _backend.backend_for(x)
    scalars = _scalars(spec, args)
    entry = prepared.get(tensors, scalars, backend)
    if entry.plan_only:  # validated here (knots too); the route's own ops run after
        entry.call.check([0 if t is None else t.data_ptr() for t in tensors])
        return spec.composite(tensors, scalars)
    if spec.finish is not None and _capturing(x):  # the finish's read-back would break the capture
        return spec.composite(tensors, scalars)
    fresh = []  # what the kernels must write before they read it
    if outs is None:
        outs = [x.new_zeros(s) if z else x.new_empty(s) for s, z in entry.outputs]
        fresh = [o for o, (_, z) in zip(outs, entry.outputs) if not z]
    else:
        for o, (_, z) in zip(outs, entry.outputs):
            if z:
                o.zero_()
    everything = tensors + outs
    if entry.work is not None:
        n, wd = entry.work
        if backend == "cpu" and 0 < n <= _SMALL_WORK:  # the launch below is synchronous: reuse a buffer
            everything.append(_small_work(n, wd))
        else:
            everything.append(torch.empty(n, dtype=wd, device=x.device) if n else None)
            fresh.append(everything[-1])
    if backend in _EMULATORS:  # what compute-sanitizer's initcheck sees on a GPU: a value never written
        _poison(fresh)
    dispatches = entry.launch([0 if t is None else t.data_ptr() for t in everything], _backend.stream_for(x))
    if dispatches:
        _backend.run_metal_dispatches(dispatches, everything, backend)
    result = outs[0] if len(outs) == 1 else tuple(outs)
    return spec.finish(tensors, scalars, result) if spec.finish else result


class _Packed:
    """An op's scalar arguments as one pytree leaf."""
    __slots__ = ("values",)

    def __init__(self, values):
        self.values = tuple(values)


def _unpacked(args) -> tuple:
    args = tuple(args)
    return (*args[:-1], *args[-1].values) if args and isinstance(args[-1], _Packed) else args


def _contiguous(tensors):
    return [t if t is None or t.is_contiguous() else t.contiguous() for t in tensors]


def _inputs(spec: OpSpec, args) -> list:
    """The op's tensors as its kernels read them: contiguous, but x in any strides for a strided route."""
    if spec.strided:
        return [args[0], *_contiguous(args[1:spec.n_in])]
    return _contiguous(args[:spec.n_in])


def _fake(spec: OpSpec, prepared: _Prepared, args):
    tensors = _inputs(spec, args)  # as the kernel sees them
    x = tensors[0]
    # prepare's cache key holds shapes and strides: symbolic ones (a recompile for new strides) take fake_shapes
    if all(isinstance(s, int) for t in tensors if t is not None for s in (*t.shape, *t.stride())):
        shapes = prepared.get(tensors, _scalars(spec, args), _backend.backend_for(x)).call.outputs
    else:
        shapes = spec.fake_shapes(*args)
    outs = [spec.out_like(x, s) if spec.out_like and k == 0 else x.new_empty(s) for k, s in enumerate(shapes)]
    return outs[0] if len(outs) == 1 else tuple(outs)


_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_STATE = threading.local()


def recording() -> bool:
    """True while an op's forward runs for autograd (its backward will follow): a composite route may
    then hold what its backward reuses."""
    return getattr(_STATE, "recording", None) is not None


def hold(owner, attr: str, key, value) -> None:
    """Leaves value on tensor owner (attribute attr) for the backward of this very call (the recorded
    forward's token), under key; tensors that take no attributes hold nothing (the backward then
    recomputes)."""
    try:
        setattr(owner, attr, (getattr(_STATE, "recording", None), key, value))
    except (AttributeError, RuntimeError):
        pass


def take(owner, attr: str, key):
    """The value held on owner under key by the forward whose backward runs now, taken off it either
    way; None if absent, of another key or of another forward (one recorded after it on the same
    tensor, e.g. gradcheck's perturbed forwards, whose .data changes leave the versions as they were)."""
    held = getattr(owner, attr, None)
    if held is None:
        return None
    setattr(owner, attr, None)
    token = getattr(_STATE, "backward", None)
    return held[2] if token is not None and held[0] is token and held[1] == key else None


def _recorded(run, *args):
    """run(*args) with recording() true (an op's forward for autograd), under a token of its own, left in
    _STATE.last for the Function's context (its backward presents it to take)."""
    before = getattr(_STATE, "recording", None)
    token = _STATE.recording = object()
    try:
        return run(*args)
    finally:
        _STATE.recording = before
        _STATE.last = token


def _backward_of_call(token, run, *args):
    """run(*args) (a backward) with the token of the forward it differentiates."""
    before = getattr(_STATE, "backward", None)
    _STATE.backward = token
    try:
        return run(*args)
    finally:
        _STATE.backward = before


def _autograd(spec: OpSpec, op):
    """The Autograd kernel: an autograd.Function when a tensor input needs a gradient, else straight
    to the device kernel (no Function overhead on inference calls). Derivatives without a kernel
    (a backward op's own backward, forward mode) come from the op's formulation (formulation.py)."""
    n_in = spec.n_in

    def backward_of(needs, saved, scalars, grads):  # the kernels' backward op, else the formulation's
        if spec.backward is not None:
            return spec.backward(needs, saved, scalars, grads)
        return formulation.vjp(spec, needs, saved, scalars, grads)

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, keyset, *args):
            # keyset None: called from the public wrapper on plain eager tensors (no dispatcher)
            if keyset is None:
                out = _recorded(_run, spec, op._swisk_prepared, args)
            else:
                out = _recorded(op.redispatch, keyset & _AFTER_AUTOGRAD, *args)
            ctx.save_for_backward(*args[:n_in])
            ctx.scalars, ctx.token = args[n_in:], _STATE.last
            return out

        @staticmethod
        def backward(ctx, *grads):
            grads_in = _backward_of_call(ctx.token, backward_of, ctx.needs_input_grad[1:1 + n_in], ctx.saved_tensors,
                                         ctx.scalars, grads)
            return (None, *grads_in, *(None for _ in ctx.scalars))

    Fn.__name__ = f"{spec.name}_fn"
    op._swisk_function = Fn

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
            ctx.token = getattr(_STATE, "last", None)  # forward ran just before, in this thread

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


SCHEMAS: list = []  # every op's schema, in definition order


def tag_compile_caches() -> None:
    """torch.compile's on-disk caches (FX graph, AOTAutograd) key a graph by its code, which names each
    op but not its schema: after an upgrade that changed a schema, a graph compiled against the old
    one would be loaded and call the op with the old arguments. A hash of swisk's schemas joins
    torch.compiler.config.cache_key_tag, so such graphs recompile (once per schema change)."""
    import hashlib
    cfg = getattr(torch.compiler, "config", None)
    if cfg is None or not hasattr(cfg, "cache_key_tag"):  # an older torch: no tag to join
        return
    tag = "swisk-" + hashlib.sha256("\n".join(SCHEMAS).encode()).hexdigest()[:16]
    if tag not in cfg.cache_key_tag:
        cfg.cache_key_tag = f"{cfg.cache_key_tag} {tag}".strip()


def _register_autocast(name: str, op, dev: str) -> None:
    """Under autocast on dev the op runs on fp32 copies of its floating inputs on dev: torch's
    register_autocast where it has one (2.7 and later; before 2.12 for cpu and cuda only), else the same
    kernel at the Autocast<Device> dispatch key."""
    if hasattr(torch.library, "register_autocast"):
        try:
            torch.library.register_autocast(f"swisk::{name}", dev, torch.float32, lib=LIB)
        except ValueError:  # torch before 2.12 takes autocast rules for cpu and cuda only
            pass
        return
    key = getattr(torch._C.DispatchKey, "Autocast" + {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS"}[dev], None)
    if key is None:
        return
    excluded = torch._C.DispatchKeySet(key)

    def up(a):
        return a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() and a.device.type == dev else a

    def kernel(*args):
        with torch._C._ExcludeDispatchKeyGuard(excluded):
            return op(*(up(a) for a in args))

    LIB.impl(name, kernel, key.name)


def define(spec: OpSpec):
    """Registers torch.ops.swisk.<name> from its description; returns the OpOverload."""
    SCHEMAS.append(_schema(spec))
    LIB.define(SCHEMAS[-1])
    op = getattr(torch.ops.swisk, spec.name).default
    prepared = _Prepared(spec)

    def impl(*args):
        return _run(spec, prepared, args)

    op._swisk_spec, op._swisk_prepared = spec, prepared
    for key in DEVICE_KEYS:
        LIB.impl(spec.name, impl, key)
    torch.library.register_fake(f"swisk::{spec.name}", lambda *args: _fake(spec, prepared, args), lib=LIB)
    LIB.impl(spec.name, _autograd(spec, op), "Autograd", with_keyset=True)
    if spec.autocast == "fp32":
        for dev in ("cpu", "cuda", "mps"):
            if torch.amp.is_autocast_available(dev):
                _register_autocast(spec.name, op, dev)
    torch.library.register_vmap(f"swisk::{spec.name}", _vmap_rule(spec, op), lib=LIB)
    return op


_DISPATCH, _PLAIN, _PLAIN_GRAD, _FUNCTORCH = 0, 1, 2, 3
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)
_wrapped = torch._C._functorch.is_functorch_wrapped_tensor  # Parameter: a tensor without torch-function overrides


def _route(tensors) -> int:
    """_PLAIN(_GRAD) when nothing but the kernel (and autograd) would see the call: no compiler,
    tracer, dispatch or torch-function mode, functorch transform or forward-AD level, no tensor
    subclass. Such calls skip torch's dispatcher (two Python round trips per call)."""
    if torch.compiler.is_compiling():
        return _DISPATCH
    if torch._C._are_functorch_transforms_active():  # torch.func: its autograd.Function, above the dispatcher
        return _FUNCTORCH
    if (_get_current_dispatch_mode() is not None or torch._C._is_torch_function_mode_enabled()
            or _forward_ad._current_level >= 0 or torch._C._get_tracing_state() is not None):
        return _DISPATCH
    route = _PLAIN
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is not None:
            if type(t) not in _PLAIN_TYPES or _wrapped(t) or t.is_meta:  # wrapped: a torch.func pullback
                return _DISPATCH                                        # running later; meta: the fake kernel
            if grad and t.requires_grad:
                route = _PLAIN_GRAD
    return route


def invoke(op, *args):
    """Calls a swisk op (positional arguments, already checked) by the cheapest correct route."""
    if torch.compiler.is_compiling():  # the op itself, before dynamo meets attributes it cannot wrap
        return op(*args)
    route = _route(args[:op._swisk_spec.n_in])
    if route == _PLAIN:
        return _run(op._swisk_spec, op._swisk_prepared, args)
    if route == _PLAIN_GRAD:
        return op._swisk_function.apply(None, *args)
    if route == _FUNCTORCH:
        return op._swisk_functorch(None, *args)
    return op(*args)


_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", lambda: True)  # torch 2.4 and later


def wrapper(spec: OpSpec, op):
    """The public function, with the op's signature and defaults: argument types checked (naming the op
    and the argument), autocast applied, then the op."""
    names, n_in = spec.input_names(), spec.n_in
    optional = [n.endswith("?") for n in spec.inputs]
    scalars = tuple((n_in + i, name, typ) for i, (name, typ) in enumerate(spec.scalars))

    def check(*args):
        for a, name, opt in zip(args, names, optional):  # the tensors
            if not isinstance(a, torch.Tensor) and not (a is None and opt):
                raise TypeError(f"[{spec.name}] {name}: expected a torch.Tensor, got {type(a).__name__}")
        for i, name, typ in scalars:
            a = args[i]
            if typ is int and type(a) is int:
                continue
            if typ is list:
                if not isinstance(a, (list, tuple)) or not all(isinstance(e, int) and not isinstance(e, bool) for e in a):
                    raise TypeError(f"[{spec.name}] {name}: expected {_ARTICLE[typ]}, got {a!r}")
            elif not isinstance(a, typ) or (typ is int and isinstance(a, bool)):
                raise TypeError(f"[{spec.name}] {name}: expected {_ARTICLE[typ]}, got {type(a).__name__}")
        if spec.autocast is None or not _any_autocast():
            return invoke(op, *args)
        if spec.autocast == "lower":
            dev = args[0].device.type
            if _backend.autocast_enabled(dev) and args[0].is_floating_point():
                dt = torch.get_autocast_dtype(dev)
                args = (*(None if t is None else t.to(dt) for t in args[:n_in]), *args[n_in:])
        elif spec.autocast == "fp32" and _backend.autocast_enabled(args[0].device.type):
            return op(*args)
        return invoke(op, *args)

    all_names = names + [n for n, _ in spec.scalars]
    params = ", ".join(f"{n}={spec.defaults[n]!r}" if n in spec.defaults else n for n in all_names)
    src = f"def {spec.name}({params}):\n    return _check({', '.join(all_names)})\n"
    scope = {"_check": check}
    exec(src, scope)  # a real signature (help(), inspect, keywords) at the cost of one call
    fn = scope[spec.name]
    fn.__doc__ = spec.doc
    fn.__module__ = "swisk.ops"
    return fn
