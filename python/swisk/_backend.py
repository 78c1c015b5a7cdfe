"""Bridge between torch tensors and the torch-free core: views, backend choice, streams, Metal plans."""
from __future__ import annotations

import contextlib
import functools
import threading
from importlib import resources

import torch

from . import _C

_DTYPES = {
    torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
    torch.int32: 4, torch.int64: 5, torch.uint8: 6, torch.bool: 7,
}
_DEVICES = {"cpu": 0, "cuda": 1, "mps": 2}
_state = threading.local()


def view(op: str, arg: str, t: torch.Tensor, data: bool = True) -> tuple:
    """The core's view of a tensor: (data_ptr, dtype, shape, strides, device, index)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"[{op}] {arg}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"[{op}] {arg}: unsupported dtype {t.dtype}")
    if t.device.type == "meta" and not data:  # shapes only (fake kernels): validated as on the CPU
        return (0, _DTYPES[t.dtype], tuple(t.shape), tuple(t.stride()), 0, 0)
    if t.device.type not in _DEVICES:
        raise ValueError(f"[{op}] {arg}: unsupported device {t.device}")
    ptr = t.data_ptr() if data else 0
    return (ptr, _DTYPES[t.dtype], tuple(t.shape), tuple(t.stride()), _DEVICES[t.device.type], t.device.index or 0)


def dtype_code(dtype: torch.dtype) -> int:
    """The core's code of a torch dtype."""
    return _DTYPES[dtype]


_CODES = {v: k for k, v in _DTYPES.items()}


def dtype_of_code(code: int) -> torch.dtype:
    """The torch dtype of a core dtype code."""
    return _CODES[code]


def cpu_backend() -> str:
    """Which backend runs ops on CPU tensors: 'cpu', or an emulator ('cuda-emu', 'metal-emu') in tests."""
    return getattr(_state, "cpu_backend", "cpu")


@contextlib.contextmanager
def use_cpu_backend(name: str):
    """Route ops on CPU tensors to another host backend (the emulators run the GPU kernels' code)."""
    if name not in ("cpu", "cuda-emu", "metal-emu"):
        raise ValueError(f"[swisk] backend: expected 'cpu', 'cuda-emu' or 'metal-emu', got {name!r}")
    old = cpu_backend()
    _state.cpu_backend = name
    try:
        yield
    finally:
        _state.cpu_backend = old


# The device types with autocast, read once: torch.compile before torch 2.12 cannot trace the query
_AUTOCAST_TYPES = frozenset(d for d in ("cpu", "cuda", "mps", "xpu", "hpu") if torch.amp.is_autocast_available(d))


def autocast_enabled(device_type: str) -> bool:
    """torch.is_autocast_enabled for a device type, False where autocast does not exist (meta)."""
    return device_type in _AUTOCAST_TYPES and torch.is_autocast_enabled(device_type)


def backend_for(t: torch.Tensor) -> str:
    """The backend that runs an op whose first input is t."""
    if t.is_cpu or t.is_meta:  # meta: shapes only, validated as on the CPU
        return cpu_backend() if t.is_cpu else "cpu"
    return "cuda" if t.is_cuda else t.device.type


# The current stream's handle in one call (torch's CUDA builds; what torch.compile's generated code
# uses): torch.cuda.current_stream builds a Stream object per call, a few microseconds per launch.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def stream_for(t: torch.Tensor) -> int:
    """The handle of the current CUDA stream of t's device (0 elsewhere), where the kernels launch."""
    if t.is_cuda:
        if _raw_stream is not None:
            return _raw_stream(t.device.index)
        return torch.cuda.current_stream(t.device).cuda_stream
    return 0


# ---- Metal -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def metal_library():
    """The kernels compiled by torch.mps from the emitted MSL source shipped in the package."""
    source = resources.files("swisk").joinpath("swisk_kernels.metal").read_text()
    return torch.mps.compile_shader(source)


def _mps_dispatch(kernel: str, grid, threadgroup, params: bytes, buffers: list) -> None:
    fn = getattr(metal_library(), kernel)
    p = torch.frombuffer(bytearray(params), dtype=torch.uint8).to("mps")
    threads = [g * t for g, t in zip(grid, threadgroup)]
    fn(*buffers, p, threads=threads, group_size=list(threadgroup))


def _emu_dispatch(kernel: str, grid, threadgroup, params: bytes, buffers: list) -> None:
    # bound tensors are contiguous: each is guarded over exactly its elements
    _C.metal_emu_run(kernel, list(grid), list(threadgroup), params,
                     [(b.data_ptr(), b.numel() * b.element_size()) for b in buffers])


def run_metal_dispatches(dispatches: list, tensors: list, backend: str) -> None:
    """Performs the dispatches C++ decided: slot k of each gets tensors[buffers[k]] (an absent optional
    tensor: a one-element dummy), then the parameter bytes. MPS runs them on torch's MPS stream;
    metal-emu binds the same way and only the last step, running the kernel, differs."""
    run = _mps_dispatch if backend == "mps" else _emu_dispatch
    dummy = None
    for kernel, grid, threadgroup, params, slots in dispatches:
        bound = []
        for i in slots:
            t = tensors[i]
            if t is None:
                if dummy is None:
                    dummy = tensors[0].new_zeros(1)
                t = dummy
            bound.append(t)
        run(kernel, grid, threadgroup, params, bound)


# ---- what is usable here -----------------------------------------------------------------------
def cuda_usable() -> bool:
    """Built with CUDA, and its runtime can run here (build_info()['cuda_unusable_reason'] says why not)."""
    info = _C.build_info()
    if not info["cuda_compiled"] or info.get("cuda_unusable_reason"):
        return False
    return torch.cuda.is_available() and _C.cuda_device_count() > 0


def mps_usable() -> bool:
    return torch.backends.mps.is_available() and hasattr(torch.mps, "compile_shader")
