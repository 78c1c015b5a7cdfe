"""One description per op: `define(OpSpec(...))` registers torch.ops.swisk.<name> (schema, device
kernels, fake kernel, autograd, autocast, vmap); `wrapper(spec, op)` makes its public function, and
`invoke` calls an op by the cheapest correct route (run.py's path, straight or under autograd)."""
from __future__ import annotations

import contextlib

import torch

from torch.autograd import forward_ad as _forward_ad
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .. import _backend
from .autograd import autograd_kernel, vmap_rule
from .run import OpSpec, _fake, _Prepared, _run

LIB = torch.library.Library("swisk", "DEF")  # noqa: TOR901  (ops defined once, at import)
DEVICE_KEYS = ("CPU", "CUDA", "MPS")
_SCHEMA_TYPES = {int: "int", str: "str", bool: "bool", float: "float", list: "int[]"}
_ARTICLE = {int: "an int", str: "a str", bool: "a bool", float: "a float", list: "a list of ints"}


def _schema(spec: OpSpec) -> str:
    args = [f"Tensor{'?' if n.endswith('?') else ''} {n.rstrip('?')}" for n in spec.inputs]
    args += [f"{_SCHEMA_TYPES[t]} {n}" for n, t in spec.scalars]
    outs = ", ".join("Tensor" for _ in spec.outputs)
    return f"{spec.name}({', '.join(args)}) -> {outs if len(spec.outputs) == 1 else '(' + outs + ')'}"


SCHEMAS: list = []  # every op's schema, in definition order


def tag_compile_caches() -> None:
    """torch.compile's on-disk caches (FX graph, AOTAutograd) key a graph by its code, which names each
    op but not its schema: after an upgrade that changed a schema, a graph compiled against the old
    one would be loaded and call the op with the old arguments. A hash of swisk's schemas joins
    torch.compiler.config.cache_key_tag, so such graphs recompile (once per schema change)."""
    import hashlib
    try:  # a submodule that torch before 2.7 does not import with torch.compiler
        from torch.compiler import config as cfg
    except ImportError:
        return
    if not hasattr(cfg, "cache_key_tag"):  # an older torch: no tag to join
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
    LIB.impl(spec.name, autograd_kernel(spec, op), "Autograd", with_keyset=True)
    if spec.autocast == "fp32":
        for dev in ("cpu", "cuda", "mps"):
            if torch.amp.is_autocast_available(dev):
                _register_autocast(spec.name, op, dev)
    torch.library.register_vmap(f"swisk::{spec.name}", vmap_rule(spec, op), lib=LIB)
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
        return op._swisk_apply(None, *args)
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


@contextlib.contextmanager
def errors_named(shared: str, name: str):
    """The TypeError / ValueError of an op shared by several public names ("[shared] ...") raised under the
    name the caller used ("[name] ...")."""
    try:
        yield
    except (TypeError, ValueError) as e:
        prefix = f"[{shared}]"
        if not str(e).startswith(prefix):
            raise
        raise (ValueError if isinstance(e, ValueError) else TypeError)(f"[{name}]{str(e)[len(prefix):]}") from None
