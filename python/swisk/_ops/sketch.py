"""The sketch family: seeded operators S (k x n) whose entries are a pure function of (seed, row,
column). sketch_matrix generates a tile of S in swisk's kernels; sketch (x S^T) and its transpose
(g S) multiply bounded column tiles of S with torch's GEMM (C++ prepare says so), except sparse-sign,
which has kernels of its own on every backend (on CUDA where they beat the GEMM). The backward reuses the
forward's S when it was one tile (within the workspace bound), else regenerates it."""
from __future__ import annotations

import torch

from .. import _C, config
from ..reference import sketch as ref
from ..reference.sketched import term_seed
from .define import _PLAIN, _route, define, errors_named, invoke, wrapper
from .run import OpSpec, _run, hold, recording, take
from .kan_gemm import accumulate

SKETCHES = tuple(_C.sketch_names().split(", "))  # the kernel header's list, in id order
MAX_NNZ = _C.sketch_max_nnz()
_SEED_END = 1 << 63


def _check_args(op: str, kind, k, seed, nnz, n=None) -> None:
    """Types and ranges Python must see before the schema (a seed past int64 would overflow it)."""
    if not isinstance(kind, str):
        raise TypeError(f"[{op}] kind: expected a str, got {type(kind).__name__}")
    if kind not in SKETCHES:
        raise ValueError(f"[{op}] kind: unknown sketch {kind!r}; valid: {', '.join(SKETCHES)}")
    for name, v in (("k", k), ("seed", seed), ("nnz", nnz)) + ((("n", n),) if n is not None else ()):
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"[{op}] {name}: expected an int, got {type(v).__name__}")
        if name != "seed" and not 1 <= v < 1 << 31:  # C++ checks nnz against k; here the schema's range
            if name != "nnz" or not -(1 << 63) <= v < 1 << 63:
                raise ValueError(f"[{op}] {name}: must be in [1, 2^31), got {v}")
    if not 0 <= seed < _SEED_END:
        raise ValueError(f"[{op}] seed: must be a non-negative int below 2^63, got {seed}")


def _tile_cols(rows: int, n: int, elem: int) -> int:
    """Columns of S per tile: rows x cols elements within swisk.config's workspace_bytes."""
    return max(1, min(n, config.get("workspace_bytes") // max(1, rows * elem)))


def _tile(like, kind, k, n, seed, c0, c1, nnz, buf=None):
    """S[:, c0:c1] as (k, c1 - c0) in like's dtype and device (the generation kernel, no dispatcher),
    written into the front of buf when given."""
    outs = None if buf is None else [buf[:k * (c1 - c0)].view(k, c1 - c0)]
    return _run(SKETCH_MATRIX, sketch_matrix_op._swisk_prepared, (like, kind, k, n, seed, 0, k, c0, c1, nnz, 0, 0, 0),
                outs)


def _key(x, kind, k, n, seed, nnz):
    """What a held S is a pure function of (any S found under it is that S)."""
    return (kind, k, n, seed, nnz, x.dtype, x.device)


def _product(x2, kind, k, n, seed, nnz, keep=None):
    """x2 (rows, n) S^T by the GEMM over column tiles of S; keep(S) is called when S was one tile."""
    like = x2.new_empty(0)
    step = _tile_cols(k, n, x2.element_size())
    if step >= n:  # one tile, the whole S
        s = _tile(like, kind, k, n, seed, 0, n, nnz)
        if keep is not None:
            keep(s)
        return x2 @ s.T
    # fp16/bf16: the tiles' products summed in fp32, rounded once (as one GEMM over the whole S would)
    wide = torch.float32 if x2.dtype in (torch.float16, torch.bfloat16) else x2.dtype
    y, buf = torch.empty(x2.shape[0], k, dtype=wide, device=x2.device), x2.new_empty(k * step)  # one tile, reused
    for c0 in range(0, n, step):
        c1 = min(n, c0 + step)
        accumulate(y, x2[:, c0:c1], _tile(like, kind, k, n, seed, c0, c1, nnz, buf).T, c0 == 0)
    return y.to(x2.dtype)


def _transpose_product(g2, kind, n, seed, nnz):
    """g2 (rows, k) S by the GEMM over column tiles of S."""
    k, like = g2.shape[1], g2.new_empty(0)
    step = _tile_cols(k, n, g2.element_size())
    if step >= n:
        return g2 @ _tile(like, kind, k, n, seed, 0, n, nnz)
    out, buf = g2.new_empty(g2.shape[0], n), g2.new_empty(k * step)
    for c0 in range(0, n, step):
        c1 = min(n, c0 + step)
        torch.mm(g2, _tile(like, kind, k, n, seed, c0, c1, nnz, buf), out=out[:, c0:c1])
    return out


def _sketch_tiles(tensors, scalars):
    (x,), (kind, k, seed, nnz) = tensors, scalars
    n = x.shape[-1]
    keep = None
    if recording():  # the backward of this call reuses a one-tile S
        def keep(s):
            hold(x, "sketch", _key(x, kind, k, n, seed, nnz), s)
    return _product(x.reshape(-1, n), kind, k, n, seed, nnz, keep).reshape(*x.shape[:-1], k)


def _transpose_tiles(tensors, scalars):
    (g,), (kind, n, seed, nnz) = tensors, scalars
    return _transpose_product(g.reshape(-1, g.shape[-1]), kind, n, seed, nnz).reshape(*g.shape[:-1], n)


def _nonfinite_rows(rows, redo, out2):
    """The sparse-sign kernels add S's nnz non-zeros per column alone; the product that defines the op
    also multiplies S's zeros, so an inf or NaN in a row makes NaN wherever a zero of S meets it. A
    row of `rows` (the k-sized side of the call: the sketch's output, the transpose's input) holds one
    exactly when its sum is not finite (or overflows, harmlessly); such rows are computed again by the
    GEMM over S's tiles, `redo(row indices)`, into out2. Every backend thus gives the product's
    NaN/inf pattern; the check reads one flag back from a GPU."""
    bad = ~torch.isfinite(rows.sum(-1, dtype=torch.float64 if rows.dtype == torch.float64 else torch.float32))
    if bad.any():
        idx = bad.nonzero().squeeze(1)
        out2[idx] = redo(idx)


def _sketch_finish(tensors, scalars, out):
    (x,), (kind, k, seed, nnz) = tensors, scalars
    n = x.shape[-1]
    x2, y2 = x.reshape(-1, n), out.view(-1, k)
    _nonfinite_rows(y2, lambda idx: _product(x2[idx], kind, k, n, seed, nnz), y2)
    return out


def _transpose_finish(tensors, scalars, out):
    (g,), (kind, n, seed, nnz) = tensors, scalars
    g2 = g.reshape(-1, g.shape[-1])
    _nonfinite_rows(g2, lambda idx: _transpose_product(g2[idx], kind, n, seed, nnz), out.view(-1, n))
    return out


def _sketch_backward(need, saved, scalars, grads):
    kind, k, seed, nnz = scalars
    x, g = saved[0], grads[0]
    n = x.shape[-1]
    s = take(x, "sketch", _key(g, kind, k, n, seed, nnz))
    if not need[0]:
        return (None,)
    if s is not None:  # g S with the forward's S (a plain product: double backward through torch)
        return ((g.reshape(-1, k) @ s).reshape(*g.shape[:-1], n),)
    return (invoke(sketch_transpose_op, g, kind, n, seed, nnz),)


def _transpose_backward(need, saved, scalars, grads):
    kind, n, seed, nnz = scalars
    return (invoke(sketch_op, grads[0], kind, saved[0].shape[-1], seed, nnz) if need[0] else None,)


def _linear_jvp(op):
    """Forward-mode tangent of a linear op: the op applied to the tangent."""
    def jvp(primals, scalars, tangents):
        t = tangents[0]
        if t is None:
            return invoke(op, torch.zeros_like(primals[0]), *scalars)
        return invoke(op, t.contiguous(), *scalars)
    return jvp


def _matrix_reference(like, kind, k, n, seed, r0, r1, c0, c1, nnz, terms, stream0, stream_step):
    seeds = [seed] if terms == 0 else [term_seed(seed, stream0 + t * stream_step) for t in range(terms)]
    return torch.cat([ref.sketch_matrix(kind, k, n, s, like.dtype, like.device, nnz)[r0:r1, c0:c1] for s in seeds])


# The tile [r0, r1) x [c0, c1) of S; terms >= 1: a stack of that many operators' tiles (terms·(r1 - r0)
# rows), term t's of seed term_seed(seed, stream0 + t·stream_step): a layer's seeded operators in one call.
SKETCH_MATRIX = OpSpec(
    name="sketch_matrix", inputs=("like",),
    scalars=(("kind", str), ("k", int), ("n", int), ("seed", int), ("r0", int), ("r1", int), ("c0", int),
             ("c1", int), ("nnz", int), ("terms", int), ("stream0", int), ("stream_step", int)),
    outputs=("out",), prepare=_C.sketch_matrix_prepare,
    backward=lambda need, saved, scalars, grads: (None,),
    reference=_matrix_reference,
    fake_shapes=lambda like, kind, k, n, seed, r0, r1, c0, c1, nnz, terms, stream0, stream_step: [
        (max(terms, 1) * (r1 - r0), c1 - c0)])

SKETCH = OpSpec(
    name="sketch", inputs=("x",), scalars=(("kind", str), ("k", int), ("seed", int), ("nnz", int)),
    outputs=("out",), prepare=_C.sketch_prepare, composite=_sketch_tiles, finish=_sketch_finish,
    backward=_sketch_backward,
    reference=ref.sketch, row_outputs=("out",), defaults={"nnz": 8}, autocast="lower",
    fake_shapes=lambda x, kind, k, seed, nnz: [(*x.shape[:-1], k)])

SKETCH_TRANSPOSE = OpSpec(
    name="sketch_transpose", inputs=("grad",), scalars=(("kind", str), ("n", int), ("seed", int), ("nnz", int)),
    outputs=("out",), prepare=_C.sketch_transpose_prepare, composite=_transpose_tiles, finish=_transpose_finish,
    backward=_transpose_backward, reference=ref.sketch_transpose, row_outputs=("out",),
    fake_shapes=lambda g, kind, n, seed, nnz: [(*g.shape[:-1], n)])


def _fwht_backward(need, saved, scalars, grads):
    return (invoke(fwht_op, grads[0], *scalars) if need[0] else None,)  # H is symmetric


FWHT = OpSpec(
    name="fwht", inputs=("x",), scalars=(("scale", float),), outputs=("out",), prepare=_C.fwht_prepare,
    backward=_fwht_backward, reference=ref.fwht, row_outputs=("out",), fake_shapes=lambda x, scale: [tuple(x.shape)])


def _srht_backward(need, saved, scalars, grads):
    return (invoke(srht_transpose_op, grads[0], saved[0].shape[-1], scalars[1]) if need[0] else None,)


def _srht_transpose_backward(need, saved, scalars, grads):
    return (invoke(srht_op, grads[0], saved[0].shape[-1], scalars[1]) if need[0] else None,)


SRHT = OpSpec(
    name="srht", inputs=("x",), scalars=(("k", int), ("seed", int)), outputs=("out",), prepare=_C.srht_prepare,
    backward=_srht_backward, reference=ref.srht, row_outputs=("out",),
    fake_shapes=lambda x, k, seed: [(*x.shape[:-1], k)])

SRHT_TRANSPOSE = OpSpec(
    name="srht_transpose", inputs=("grad",), scalars=(("n", int), ("seed", int)), outputs=("out",),
    prepare=_C.srht_transpose_prepare, backward=_srht_transpose_backward, reference=ref.srht_transpose,
    row_outputs=("out",), fake_shapes=lambda g, n, seed: [(*g.shape[:-1], n)])

sketch_matrix_op = define(SKETCH_MATRIX)
sketch_op = define(SKETCH)
sketch_transpose_op = define(SKETCH_TRANSPOSE)
fwht_op = define(FWHT)
srht_op = define(SRHT)
srht_transpose_op = define(SRHT_TRANSPOSE)
SRHT.jvp = _linear_jvp(srht_op)
SRHT_TRANSPOSE.jvp = _linear_jvp(srht_transpose_op)
FWHT.jvp = _linear_jvp(fwht_op)
SKETCH.jvp = _linear_jvp(sketch_op)
SKETCH_TRANSPOSE.jvp = _linear_jvp(sketch_transpose_op)
_sketch = wrapper(SKETCH, sketch_op)
_fwht = wrapper(FWHT, fwht_op)
_srht = wrapper(SRHT, srht_op)


def srht(x, k: int, seed: int):
    """Subsampled randomized Hadamard transform: x (..., n) -> x S^T (..., k), S = (1/sqrt(k)) R H_N D with
    N = n rounded up to a power of two (x zero-padded), D random signs and R k distinct rows of H_N
    (a keyed permutation: swisk.reference.sketch documents both). E ||S x||^2 = ||x||^2. O(N log N) per
    row through the FWHT; the gradient is the exact transpose (the inverse permutation, the FWHT, D).

    Args:
        x: (..., n) floating tensor.
        k: rows kept, 1 <= k <= n.
        seed: 0 <= seed < 2^63; the same seed gives the same operator everywhere.

    Returns:
        (..., k) tensor in x's dtype.

    Raises:
        TypeError / ValueError naming the argument for a wrong x, k (1 <= k <= n) or seed.
    """
    _check_args("srht", "gaussian", k, seed, 1)
    return _srht(x, k, seed)


def fwht(x, scale=None):
    """Fast Walsh-Hadamard transform along the last dimension: scale * H_n x, n a power of two, H_n the
    Sylvester +-1 matrix (natural order). scale: None for 1 (pass n ** -0.5 for the orthonormal
    transform, its own inverse). fp32 accumulation (fp64 for fp64); on GPUs rows longer than 4096 go
    through global memory in the input's dtype between stages. Differentiable (the gradient is the
    transform of the gradient, H being symmetric), forward mode included.

    Args:
        x: (..., n) floating tensor, n a power of two.
        scale: a finite float multiplying the result, or None for 1.

    Returns:
        (..., n) tensor in x's dtype.

    Raises:
        TypeError / ValueError naming the argument for a wrong x, a length that is not a power of two,
        or a non-finite scale.
    """
    if scale is None:
        scale = 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"[fwht] scale: expected a float or None, got {type(scale).__name__}")
    try:
        scale = float(scale)
    except OverflowError:  # an int past float's range
        raise ValueError(f"[fwht] scale: must be finite, got an int of {scale.bit_length()} bits") from None
    return _fwht(x, scale)


def sketch_matrix(kind: str, k: int, n: int, seed: int, dtype=torch.float32, device="cpu", nnz: int = 8):
    """The k x n sketch operator S with the given seed, as `sketch` applies it (x S^T).

    kind: "gaussian" (N(0,1)/sqrt(k)), "rademacher" (+-1/sqrt(k)) or "sparse_sign" (+-1/sqrt(nnz) at nnz
    distinct rows of each column; CountSketch at nnz = 1, 1 <= nnz <= min(k, 64)). Every entry is a
    pure function of (seed, row, column) through Philox4x32-10 (swisk.reference.sketch documents the
    scheme): the same seed gives the same S on every backend, thread count and tile split. Values are
    computed in fp32 and then rounded to dtype (fp64 holds the fp32 values exactly).

    Args:
        kind: "gaussian", "rademacher" or "sparse_sign".
        k, n: the operator's rows (the sketch size) and columns (the input size), both >= 1.
        seed: 0 <= seed < 2^63.
        dtype, device: of the result.
        nnz: non-zeros per column of "sparse_sign" (ignored by the dense kinds).

    Returns:
        (k, n) tensor.

    Raises:
        TypeError / ValueError naming the argument for a wrong kind, k, n, seed (0 <= seed < 2^63),
        nnz, dtype or device.
    """
    _check_args("sketch_matrix", kind, k, seed, nnz, n)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"[sketch_matrix] dtype: expected a torch.dtype, got {type(dtype).__name__}")
    if not dtype.is_floating_point:
        raise TypeError(f"[sketch_matrix] dtype: expected a floating-point dtype (float16, bfloat16, float32, "
                        f"float64), got {dtype}")
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        raise TypeError(f"[sketch_matrix] device: expected a torch.device, str or int, got {type(device).__name__}")
    try:
        like = torch.empty(0, dtype=dtype, device=device)
    except (RuntimeError, AssertionError) as e:  # torch's own for an unknown or absent device: its first line
        why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ValueError(f"[sketch_matrix] device: {device!r} is not a device this torch can use: {why}") from None
    return invoke(sketch_matrix_op, like, kind, k, n, seed, 0, k, 0, n, nnz, 0, 0, 0)


def stacked_operators(kind: str, k: int, n: int, seed: int, terms: int, stream0: int, stream_step: int, dtype,
                      device) -> torch.Tensor:
    """(terms, k, n): sketch_matrix(kind, k, n, term_seed(seed, stream0 + t·stream_step)) for t < terms, a
    layer's seeded operators, from one call (one launch or dispatch on a GPU). One call per operator cost
    ~20 us of Python each: on an H200 the seeded SKLinear forward took 0.6 ms more than the stored one's."""
    like = torch.empty(0, dtype=dtype, device=device)
    args = (like, kind, k, n, seed, 0, k, 0, n, 8, terms, stream0, stream_step)
    if _route([like]) != _PLAIN:  # the compiler, meta tensors, modes, transforms: through the op
        return invoke(sketch_matrix_op, *args).view(terms, k, n)
    return _run(SKETCH_MATRIX, sketch_matrix_op._swisk_prepared, args).view(terms, k, n)


def sketch(x, kind: str, k: int, seed: int, nnz: int = 8):
    """x (..., n) -> x S^T (..., k) with S = sketch_matrix(kind, k, n, seed, x.dtype, x.device, nnz).

    S is generated in column tiles of at most swisk.config's workspace_bytes and multiplied by torch's
    GEMM; it is never held whole when larger. A sparse-sign S is not formed at all: swisk's kernels
    take nnz multiply-adds per input value (n * nnz <= 2^23; on the CPU k <= 2^18, the last operators'
    column tables kept for the next calls, 32 MiB in all; on the GPUs a workspace of at most 64 MiB for
    S sorted by rows, and n * nnz / k <= 4096 entries per row of S; on CUDA k / nnz >= 96 in fp32 and
    768 in fp16/bf16, where the kernels beat cuBLAS on an H200, 32 and 256 for the transpose). An inf or
    NaN gives the product's pattern on every route (NaN wherever a zero of S meets an inf): the rows
    holding one go through the tiles (on GPUs one flag is read back per call; under CUDA graph capture,
    which forbids that, the tiles run instead of the kernels). The
    gradient is the exact transpose (g S, with the forward's S when it was one tile, else regenerated),
    itself differentiable (double backward); forward-mode tangents are the sketch of the tangent.
    Under torch.autocast x is cast to the autocast dtype and the result is in it, for every kind, as
    torch's matmul does.

    Args:
        x: (..., n) floating tensor.
        kind: "gaussian", "rademacher" or "sparse_sign".
        k: the sketch size, >= 1.
        seed: 0 <= seed < 2^63.
        nnz: non-zeros per column of "sparse_sign".

    Returns:
        (..., k) tensor in x's dtype.

    Raises:
        TypeError / ValueError naming the argument for a wrong x, kind, k (>= 1), seed, or nnz.
    """
    _check_args("sketch", kind, k, seed, nnz)
    return _sketch(x, kind, k, seed, nnz)


def _dense_named(kind: str, operator: str):
    """The named form of a dense kind: x S^T with S = sketch_matrix(kind, k, n, seed)."""
    def fn(x, k: int, seed: int):
        with errors_named("sketch", f"{kind}_sketch"):
            return sketch(x, kind, k, seed)

    fn.__name__ = fn.__qualname__ = f"{kind}_sketch"
    fn.__doc__ = f"""x S^T with {operator}; see sketch.

    Args:
        x: (..., n) floating tensor.
        k: the sketch size, >= 1.
        seed: 0 <= seed < 2^63.

    Returns:
        (..., k) tensor in x's dtype.

    Raises:
        TypeError / ValueError naming the argument for a wrong x, k or seed.
    """
    return fn


gaussian_sketch = _dense_named("gaussian", "a Gaussian S (entries N(0, 1)/sqrt(k))")
rademacher_sketch = _dense_named("rademacher", "a Rademacher S (entries +-1/sqrt(k))")


def sparse_sign_sketch(x, k: int, nnz: int, seed: int):
    """x S^T with a sparse-sign S (nnz entries +-1/sqrt(nnz) per column; CountSketch at nnz = 1); see sketch.

    Args:
        x: (..., n) floating tensor.
        k: the sketch size, >= 1.
        nnz: non-zeros per column, 1 <= nnz <= min(k, 64).
        seed: 0 <= seed < 2^63.

    Returns:
        (..., k) tensor in x's dtype.

    Raises:
        TypeError / ValueError naming the argument for a wrong x, k, nnz or seed.
    """
    with errors_named("sketch", "sparse_sign_sketch"):
        return sketch(x, "sparse_sign", k, seed, nnz)
