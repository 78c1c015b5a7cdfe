"""An op's call: its description (OpSpec), the prepared-call cache, and the one path every call takes:
C++ prepares it (validation, output shapes, scratch), Python allocates, C++ launches; Metal dispatches
come back and are bound here, for MPS and metal-emu alike. Also the state a forward leaves for its own
backward (recording / hold / take)."""
from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Optional

import torch

from .. import _backend

_CACHE_LIMIT = 512


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

    def _out_of_range(self, scalars) -> None:
        """After nanobind's own TypeError (an int past a C++ parameter's 32 bits): the named error."""
        for (name, typ), v in zip(self.spec.scalars, scalars):
            if typ in (int, list) and any(not -(1 << 31) <= e < 1 << 31 for e in (v if typ is list else (v,))):
                raise ValueError(f"[{self.spec.name}] {name}: out of range, got {v}") from None

    def get(self, tensors, scalars, backend: str) -> _Entry:
        try:
            extra = self.spec.extra(backend, tensors, scalars) if self.spec.extra else ()
        except TypeError:  # a route's own size query (routes.py) meets the scalar first
            self._out_of_range(scalars)
            raise
        key = (backend, scalars, extra,
               *[None if t is None else (t.dtype, t.device, t.shape, t.stride()) for t in tensors])
        entry = self.cache.get(key)
        if entry is None:
            names = self.spec.input_names()
            x = tensors[0]
            for n, t in zip(names, tensors):  # prepare sees a meta tensor as a CPU one (shapes only)
                if t is not None and t.is_meta != x.is_meta:
                    raise ValueError(f"[{self.spec.name}] {n}: on device {t.device}, "
                                     f"expected {names[0]}'s device {x.device}")
            views = [None if t is None else _backend.view(self.spec.name, n, t, False) for n, t in zip(names, tensors)]
            try:
                entry = _Entry(self.spec.prepare(*views, *scalars, *extra, backend))
            except TypeError:
                self._out_of_range(scalars)
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


_STATE = threading.local()


def recording() -> bool:
    """True while an op's forward runs for autograd (its backward will follow): a composite route may
    then hold what its backward reuses."""
    return getattr(_STATE, "recording", None) is not None


class _Call:
    """A recorded forward (its token): what it leaves for its own backward, under (name, owner's id).
    The autograd context keeps it, so a held tensor lives as long as the graph, and nothing goes onto
    the tensors themselves (where it would outlive a graph never differentiated, and be pickled with
    a saved module)."""
    __slots__ = ("held", "__weakref__")

    def __init__(self):
        self.held = {}

    def holds(self, value) -> bool:
        """Whether value is still held for this forward's backward (not yet taken)."""
        return any(v is value for _, v in self.held.values())


def hold(owner, name: str, key, value) -> Optional[_Call]:
    """Leaves value for the backward of the forward recorded now, as name of tensor owner, under key;
    returns that forward's token (None outside a recorded forward: nothing held)."""
    token = getattr(_STATE, "recording", None)
    if token is not None:
        token.held[name, id(owner)] = (key, value)
    return token


def take(owner, name: str, key):
    """What the forward whose backward runs now held as name of owner under key, taken off it either
    way; None if absent or of another key (a second backward through a retained graph recomputes)."""
    token = getattr(_STATE, "backward", None)
    held = token.held.pop((name, id(owner)), None) if token is not None else None
    return held[1] if held is not None and held[0] == key else None


def _recorded(run, *args):
    """run(*args) with recording() true (an op's forward for autograd), under a token of its own, left in
    _STATE.last for the Function's context (its backward presents it to take)."""
    before = getattr(_STATE, "recording", None)
    token = _STATE.recording = _Call()
    try:
        return run(*args)
    finally:
        _STATE.recording = before
        _STATE.last = token


def _last_call() -> Optional[_Call]:
    """The token _recorded left, handed to the Function's context (the only reference kept)."""
    token, _STATE.last = getattr(_STATE, "last", None), None
    return token


def _backward_of_call(token, run, *args):
    """run(*args) (a backward) with the token of the forward it differentiates."""
    before = getattr(_STATE, "backward", None)
    _STATE.backward = token
    try:
        return run(*args)
    finally:
        _STATE.backward = before
