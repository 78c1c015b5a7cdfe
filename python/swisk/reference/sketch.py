"""Sketch operators in plain torch, independent of the kernels: Philox4x32-10 vectorised over entries
(int64 arithmetic masked to 32 bits), then the same entry rules as swisk/kernels/sketch.h:

    key = (seed mod 2^32, seed >> 32); counter = (column, row, kind id, 0)
    gaussian     N(0,1)/sqrt(k): Box-Muller sqrt(-2 ln u1) cos(2 pi u2) (sin for odd columns), u =
                 ((word >> 8) + 1) 2^-24, the counter (column / 4, row, 0, 0): words 0, 1 for columns
                 4c and 4c + 1, words 2, 3 for 4c + 2 and 4c + 3
    rademacher   +-1/sqrt(k), negative where bit (column mod 32) of word (column / 32) mod 4 is set, the
                 counter (column / 128, row, 1, 0): one draw gives 128 entries of a row
    sparse_sign  +-1/sqrt(nnz) at nnz distinct rows per column (Floyd's sampling, counter (column, step,
                 2, 0), row = mulhi(word0, j + 1), sign = word1's top bit); CountSketch at nnz = 1
"""
from __future__ import annotations

import math

import torch

SKETCHES = ("gaussian", "rademacher", "sparse_sign")
_MASK = 0xFFFFFFFF
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def _mul_hi_lo(a: int, b: torch.Tensor):
    """(hi, lo) words of the 64-bit product a * b, a a 32-bit constant, b int64 words (16-bit halves:
    every partial product fits in int64)."""
    bl, bh = b & 0xFFFF, b >> 16
    p1, p2 = a * bl, a * bh  # < 2^48 each
    hi = (p2 + (p1 >> 16)) >> 16
    lo = (p1 + ((p2 & 0xFFFF) << 16)) & _MASK
    return hi, lo


def mulhi(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The high word of a * b for int64 tensors of 32-bit words."""
    bl, bh = b & 0xFFFF, b >> 16
    p1, p2 = a * bl, a * bh
    return (p2 + (p1 >> 16)) >> 16


def philox4x32_10(counter, key):
    """Philox4x32-10 of counter words (c0, c1, c2, c3) and key words (k0, k1): int64 tensors (or ints)
    of 32-bit values, broadcast together; returns the four output words as int64 tensors."""
    c = [torch.as_tensor(w, dtype=torch.int64) for w in counter]
    c = list(torch.broadcast_tensors(*c))
    k0, k1 = int(key[0]) & _MASK, int(key[1]) & _MASK
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
        hi0, lo0 = _mul_hi_lo(_M0, c[0])
        hi1, lo1 = _mul_hi_lo(_M1, c[2])
        c = [hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0]
    return c


def scale(kind: str, k: int, nnz: int) -> float:
    """1/sqrt(k) (1/sqrt(nnz) for sparse_sign) rounded once to fp32, as the kernels take it."""
    return float(torch.tensor(1.0 / math.sqrt(nnz if kind == "sparse_sign" else k), dtype=torch.float32))


def sketch_matrix(kind: str, k: int, n: int, seed: int, dtype=torch.float32, device="cpu", nnz: int = 8):
    """The k x n operator S. Values are computed as the kernels compute them (fp32, then the dtype);
    the Gaussian's logarithm and cosine come from torch (in fp64), so it matches the kernels to a few
    fp32 ulps, the other kinds bitwise."""
    if kind not in SKETCHES:
        raise ValueError(f"[sketch_matrix] kind: unknown sketch {kind!r}; valid: {', '.join(SKETCHES)}")
    kid = SKETCHES.index(kind)
    key = (seed & _MASK, seed >> 32)
    s = scale(kind, k, nnz)
    if kind == "sparse_sign":
        out = torch.zeros(k, n, dtype=torch.float32)
        cols = torch.arange(n, dtype=torch.int64)
        taken = []
        for m in range(nnz):
            j = k - nnz + m
            w = philox4x32_10((cols, m, kid, 0), key)
            row = mulhi(w[0], torch.full_like(cols, j + 1))
            for t in taken:
                row = torch.where(t == row, torch.full_like(row, j), row)
            taken.append(row)
            out[row, cols] = torch.where(w[1] >> 31 == 1, -s, s)
        return out.to(dtype=dtype, device=device)
    rows = torch.arange(k, dtype=torch.int64)[:, None]
    cols = torch.arange(n, dtype=torch.int64)[None, :]
    if kind == "rademacher":
        words = torch.stack(philox4x32_10((cols >> 7, rows, kid, 0), key))  # (4, k, n)
        word = words.gather(0, ((cols >> 5) & 3).expand(1, k, n))[0]
        out = torch.where((word >> (cols & 31)) & 1 == 1, -s, s).to(torch.float32)
    else:
        w = torch.stack(philox4x32_10((cols >> 2, rows, kid, 0), key))  # four entries per draw
        hi = ((cols >> 1) & 1).expand(k, n)
        u1 = ((w.gather(0, (2 * hi)[None])[0] >> 8) + 1).double() * 2.0**-24
        u2 = ((w.gather(0, (2 * hi + 1)[None])[0] >> 8) + 1).double() * 2.0**-24
        trig = torch.where((cols & 1) == 1, torch.sin(2.0 * math.pi * u2), torch.cos(2.0 * math.pi * u2))
        out = (torch.sqrt(-2.0 * torch.log(u1)) * trig).float() * s
    return out.to(dtype=dtype, device=device)


def sketch(x: torch.Tensor, kind: str, k: int, seed: int, nnz: int = 8) -> torch.Tensor:
    """x (..., n) -> x S^T (..., k)."""
    S = sketch_matrix(kind, k, x.shape[-1], seed, x.dtype, x.device, nnz)
    return x @ S.T


def sketch_transpose(g: torch.Tensor, kind: str, n: int, seed: int, nnz: int = 8) -> torch.Tensor:
    """g (..., k) -> g S (..., n): sketch's transpose (its vector-Jacobian product)."""
    S = sketch_matrix(kind, g.shape[-1], n, seed, g.dtype, g.device, nnz)
    return g @ S


def fwht(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """scale * H_n x along the last dimension (H_n the Sylvester +-1 Hadamard matrix, n a power of two):
    the butterflies (a, b) -> (a + b, a - b) at distances 1, 2, ..., n/2."""
    n = x.shape[-1]
    y = x
    h = 1
    while h < n:
        y = y.reshape(*x.shape[:-1], n // (2 * h), 2, h)
        a, b = y[..., 0, :], y[..., 1, :]
        y = torch.stack((a + b, a - b), dim=-2).reshape(x.shape)
        h *= 2
    return y * scale


def hadamard(n: int, dtype=torch.float64) -> torch.Tensor:
    """H_n by Sylvester's construction (H_1 = [1], H_2n = [[H, H], [H, -H]])."""
    h = torch.ones(1, 1, dtype=dtype)
    while h.shape[0] < n:
        h = torch.cat((torch.cat((h, h), 1), torch.cat((h, -h), 1)), 0)
    return h


_SRHT_SIGNS, _SRHT_PERM = 3, 4


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def srht_signs(n: int, seed: int) -> torch.Tensor:
    """D's diagonal: -1 where the draw (j, 0, 3, 0) has its top bit set, else +1 (float64)."""
    w = philox4x32_10((torch.arange(n, dtype=torch.int64), 0, _SRHT_SIGNS, 0), (seed & _MASK, seed >> 32))[0]
    return torch.where(w >> 31 == 1, -1.0, 1.0).double()


def srht_rows(k: int, n: int, seed: int) -> torch.Tensor:
    """The kept rows of H_N D x: perm(0 .. k-1), perm a 4-round Feistel permutation of [0, 2^(2h)) (h =
    ceil(log2 N / 2), round t's function the draw (half, t, 4, 0) masked to h bits) walked back into
    [0, N)."""
    big_n = _pow2_at_least(n)
    h = (big_n.bit_length() - 1 + 1) // 2
    mask, key = (1 << h) - 1, (seed & _MASK, seed >> 32)
    v = torch.arange(k, dtype=torch.int64)
    todo = torch.ones_like(v, dtype=torch.bool)
    while True:
        left, right = v >> h, v & mask
        for t in range(4):
            f = philox4x32_10((right, t, _SRHT_PERM, 0), key)[0] & mask
            left, right = right, left ^ f
        w = (left << h) | right
        v = torch.where(todo, w, v)
        todo = v >= big_n
        if not todo.any():
            return v


def srht_matrix(k: int, n: int, seed: int) -> torch.Tensor:
    """S (k x n, float64) with srht(x) = x S^T: (1/sqrt(k)) rows of H_N D, D's columns past n dropped."""
    big_n = _pow2_at_least(n)
    s = scale("rademacher", k, 1)  # 1/sqrt(k) rounded to fp32, as the kernels take it
    return hadamard(big_n)[srht_rows(k, n, seed)][:, :n] * srht_signs(n, seed) * s


def srht(x: torch.Tensor, k: int, seed: int) -> torch.Tensor:
    """x (..., n) -> x S^T (..., k) through the FWHT: (1/sqrt(k)) (H_N D pad(x))[rows]."""
    n = x.shape[-1]
    big_n = _pow2_at_least(n)
    z = torch.nn.functional.pad(x * srht_signs(n, seed).to(x), (0, big_n - n))
    return fwht(z)[..., srht_rows(k, n, seed).to(x.device)] * scale("rademacher", k, 1)


def srht_transpose(g: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """g (..., k) -> g S (..., n)."""
    k = g.shape[-1]
    return g @ srht_matrix(k, n, seed).to(g)
