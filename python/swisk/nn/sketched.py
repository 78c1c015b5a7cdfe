"""Panther's SKLinear on swisk.ops.sketched_linear (two vendor GEMMs, no (T, batch, in) expansion):
the same constructor, parameters (S1s, S2s, bias), buffers (U1s, U2s), initialisation and draw order,
so a Panther state_dict loads and gives the same output; any sizes (no multiple-of-16 rule). With
``seed=``, U1s and U2s are Rademacher operators regenerated from the seed on every forward
(swisk.ops.sketch_matrix: the same on every device and thread count) instead of stored: the state_dict
holds the seed and the operators' kind (``operator_kind``: a state_dict of the other kind raises), and the
layer's memory is its learned factors. ``operator="srht"`` makes them seeded
randomized Hadamard transforms (swisk.ops.srht_sketched_linear): entries ±1/√r as Panther's, applied in
O(n log n) per row, so two of the forward's four GEMMs (and two of the backward's six) are FWHTs."""
from __future__ import annotations

import math
import warnings

import torch
from torch.nn import init

from .. import ops
from .._ops.conv import _tuple
from .._ops.sketch import stacked_operators
from .._ops.sketched import _srht_apply, sketched_conv2d, sketched_linear, srht_sketched_linear
from ._checks import FLOAT_DTYPES, LAYER_RAISES_DOC, int_arg

_MASK63 = (1 << 63) - 1


_KINDS = ("rademacher", "srht")  # SKLinear's operator kinds, by their operator_kind code


def _signs(rows: int, cols: int, dtype, device) -> torch.Tensor:
    """Panther's scaled sign operator: ±1/√rows from torch.rand (the same draws as Panther's)."""
    return torch.sign(torch.rand(rows, cols, dtype=dtype, device=device) - 0.5) * (1.0 / math.sqrt(rows))


class _Seeded(torch.nn.Module):
    """A layer whose operators may come from a seed: the ``seed`` buffer is the state, mirrored as a Python
    int that a forward reads with no host synchronisation and torch.compile sees as a constant. The mirror
    follows the buffer: set at construction, refreshed by load_state_dict and, in an eager forward, after
    any write (DDP's broadcast, ``seed.fill_``: its version counter moved) or a new buffer (``layer.seed =
    ...``, ``to_empty``); a compiled forward uses the value read last."""

    def _set_seed(self, seed: int, device) -> None:
        self.register_buffer("seed", torch.tensor(seed, dtype=torch.int64, device=device))
        self._mirror(seed)

    def _mirror(self, seed: int) -> None:
        self._seed, self._seed_buf, self._seed_version = seed, self.seed, self.seed._version

    def _checked_seed(self, v: torch.Tensor) -> int:
        name = type(self).__name__
        if torch._C._functorch.is_batchedtensor(v):
            raise ValueError(f"[{name}] seed: one seed gives the layer's operators; under vmap share it "
                             f"(in_dims=None for the buffer) instead of stacking seeds")
        if v.numel() != 1 or v.dtype.is_floating_point or v.dtype.is_complex or v.dtype == torch.bool:
            raise ValueError(f"[{name}] seed: must be one integer, got a {v.dtype} tensor of shape {tuple(v.shape)}")
        seed = int(v)
        if not 0 <= seed <= _MASK63:
            raise ValueError(f"[{name}] seed: must be in 0..2^63-1, got {seed}")
        return seed

    def _seed_value(self) -> int:
        buf = self.seed
        if (not torch.compiler.is_compiling() and not buf.is_meta
                and (buf is not self._seed_buf or buf._version != self._seed_version)):
            self._mirror(self._checked_seed(buf))
        return self._seed

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        v = state_dict.get(prefix + "seed")
        checked = "seed" in self._buffers and isinstance(v, torch.Tensor) and v.device.type != "meta"
        seed = self._checked_seed(v) if checked else None
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if checked:
            self._mirror(seed)


class SKLinear(_Seeded):
    __doc__ = """y = 1/(2T)·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i) + bias with T = num_terms, rank r = low_rank.

    Parameters ``S1s`` (T, in, r), ``S2s`` (T, r, out), ``bias`` (out); buffers ``U1s`` (T, r, out) and
    ``U2s`` (T, in, r) — or, with ``seed``, the buffers ``seed`` and ``operator_kind`` (0 Rademacher, 1 SRHT;
    loading a state_dict of the other kind raises ValueError) and U1s/U2s regenerated per forward.

    Args:
        in_features, out_features: the widths.
        num_terms: T, low_rank: r.
        W_init: an (out, in) weight to sketch (Panther's), else random S1s/S2s.
        bias: whether the layer has a bias.
        dtype, device: of the parameters and buffers.
        seed: None (U1s/U2s drawn from torch's generator and stored) or 0 <= seed < 2^63.
        operator: "rademacher" (Panther's scaled signs; stored, or regenerated from ``seed``) or "srht"
            (seeded Hadamard operators, never materialised; without ``seed`` one is drawn from torch's
            generator); needs low_rank <= min(in_features, out_features).

""" + LAYER_RAISES_DOC

    WARNING_MSG_FC = ("The sketching layer uses more parameters than a fully connected layer. "
                      "Consider reducing 'num_terms' or 'low_rank' for efficiency.")

    def __init__(self, in_features, out_features, num_terms, low_rank, W_init=None, bias=True, dtype=None,
                 device=None, seed=None, operator="rademacher"):
        name = "SKLinear"
        fin = int_arg(name, "in_features", in_features, 1)
        fout = int_arg(name, "out_features", out_features, 1)
        t = int_arg(name, "num_terms", num_terms, 1)
        r = int_arg(name, "low_rank", low_rank, 1)
        if operator not in ("rademacher", "srht"):
            raise ValueError(f"[{name}] operator: expected 'rademacher' or 'srht', got {operator!r}")
        _float_dtype(name, dtype)
        if W_init is not None and (not isinstance(W_init, torch.Tensor) or W_init.dtype not in FLOAT_DTYPES):
            raise TypeError(f"[{name}] W_init: expected a floating tensor, got "
                            f"{getattr(W_init, 'dtype', type(W_init).__name__)}")
        if operator == "srht":
            if r > min(fin, fout):
                raise ValueError(f"[{name}] low_rank: {r} must not exceed min(in_features, out_features) = "
                                 f"{min(fin, fout)} with operator='srht'")
            if seed is None:
                seed = int(torch.randint(0, _MASK63, (), dtype=torch.int64, device="cpu"))
        if seed is not None:
            seed = int_arg(name, "seed", seed, 0, _MASK63)
        if 2 * t * r * (fout + fin) > fout * fin:
            warnings.warn(self.WARNING_MSG_FC, category=UserWarning, stacklevel=2)
        super().__init__()
        self.in_features, self.out_features, self.num_terms, self.low_rank = fin, fout, t, r
        self.operator = operator
        kw = {"dtype": dtype, "device": device}
        if seed is None:
            self.register_buffer("U1s", torch.stack([_signs(r, fout, **kw) for _ in range(t)]).contiguous())
            self.register_buffer("U2s", torch.stack([_signs(r, fin, **kw).T for _ in range(t)]).contiguous())
        else:
            self._set_seed(seed, device)
            # the operators' kind beside the seed: a state_dict of the other kind must not load silently
            self.register_buffer("operator_kind", torch.tensor(_KINDS.index(operator), dtype=torch.int64,
                                                               device=device))
        if operator == "rademacher":
            u1, u2 = self.operators(dtype=dtype, device=device)
        if W_init is None:
            w = torch.empty(fin, fout, **kw)
            init.kaiming_uniform_(w, a=math.sqrt(5))
        else:
            if not isinstance(W_init, torch.Tensor) or tuple(W_init.shape) != (fout, fin):
                raise ValueError(f"[{name}] W_init: must be a ({fout}, {fin}) tensor (out, in), got "
                                 f"{getattr(W_init, 'shape', type(W_init).__name__)}")
            w = W_init.T.detach().clone().to(**{k: v for k, v in kw.items() if v is not None})
        if operator == "srht":  # S1 = W·U1ᵀ and S2 = U2ᵀ·W, the operators applied to W's rows and columns
            s1, a1 = _srht_apply(w, t, r, fout, seed, 0, False)
            s2, a2 = _srht_apply(w.T, t, r, fin, seed, 1, False)
            self.S1s = torch.nn.Parameter((s1 * a1).view(fin, t, r).transpose(0, 1).contiguous())
            self.S2s = torch.nn.Parameter((s2 * a2).T.reshape(t, r, fout).contiguous())
        else:
            self.S1s = torch.nn.Parameter(torch.stack([w @ u1[i].T for i in range(t)]).contiguous())
            self.S2s = torch.nn.Parameter(torch.stack([u2[i].T @ w for i in range(t)]).contiguous())
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(fout, **kw))
            fan_in, _ = init._calculate_fan_in_and_fan_out(w)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)
        else:
            self.register_parameter("bias", None)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        v = state_dict.get(prefix + "operator_kind")
        mine = "operator_kind" in self._buffers
        if mine and isinstance(v, torch.Tensor) and v.device.type != "meta":
            got = int(v) if v.numel() == 1 and not v.dtype.is_floating_point else -1
            if got != _KINDS.index(self.operator):
                theirs = repr(_KINDS[got]) if 0 <= got < len(_KINDS) else f"an unknown kind ({v})"
                raise ValueError(f"[SKLinear] operator: the state_dict's layer has {theirs} operators, this one "
                                 f"{self.operator!r}")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        if mine and v is None and prefix + "operator_kind" in missing_keys:  # a state_dict saved before the kind
            missing_keys.remove(prefix + "operator_kind")

    def operators(self, dtype=None, device=None):
        """(U1s, U2s): the stored buffers, or the Rademacher or SRHT operators of the seed."""
        if "seed" not in self._buffers:
            return self.U1s, self.U2s
        seed = self._seed_value()
        dtype = dtype or (self.S1s.dtype if hasattr(self, "S1s") else torch.get_default_dtype())
        device = device or self.seed.device
        t, r = self.num_terms, self.low_rank
        if self.operator == "srht":
            return ops.srht_sketched_operators(t, r, self.in_features, self.out_features, seed, dtype, device)
        u1 = stacked_operators("rademacher", r, self.out_features, seed, t, 0, 2, dtype, device)  # streams 0, 2, ..
        u2 = stacked_operators("rademacher", r, self.in_features, seed, t, 1, 2, dtype, device)  # 1, 3, ..
        # U2s (T, in, r) as a view of the (T, r, in) rows: sketched_linear's x·U2 then reads them in place
        return u1, u2.transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.operator == "srht":
            return srht_sketched_linear(x, self.S1s, self.S2s, self._seed_value(), self.bias)
        u1, u2 = self.operators(self.S1s.dtype, self.S1s.device)
        return sketched_linear(x, self.S1s, self.S2s, u1, u2, self.bias)

    def extra_repr(self) -> str:
        seeded = f", seed={self._seed}" if "seed" in self._buffers else ""
        seeded += ", operator='srht'" if self.operator == "srht" else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, num_terms={self.num_terms}, "
                f"low_rank={self.low_rank}, bias={self.bias is not None}{seeded}")


def _float_dtype(name, dtype):
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise TypeError(f"[{name}] dtype: must be one of {', '.join(str(d) for d in FLOAT_DTYPES)}, got {dtype}")


def _pair(name, arg, v, minimum):
    return tuple(_tuple(name, arg, v, 2, minimum))


class SKConv2d(_Seeded):
    __doc__ = """Panther's SKConv2d: y = conv2d(x, S1s) combined over its L·r channels by the fixed U1s (/L) + bias,
    L = 2·num_terms. Parameters ``S1s`` (L·r, C, kh, kw) and ``bias``; buffer ``U1s`` (L, r, out), or with
    ``seed`` the buffer ``seed`` and U1s regenerated per forward. ``fromTorch(conv, num_terms, low_rank)``
    sketches an existing nn.Conv2d (groups 1, dilation 1).

    Args:
        in_channels, out_channels, kernel_size, stride, padding, bias: as nn.Conv2d's.
        num_terms, low_rank: T and r (L·r = 2·T·r channels in between).
        layer: an nn.Conv2d to sketch (Panther's), else random S1s.
        dtype, device: of the parameters and buffers.
        seed: None (U1s drawn and stored) or 0 <= seed < 2^63.

""" + LAYER_RAISES_DOC

    def __init__(self, in_channels, out_channels, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=True,
                 num_terms=6, low_rank=8, layer=None, dtype=None, device=None, seed=None):
        name = "SKConv2d"
        super().__init__()
        self.in_channels = int_arg(name, "in_channels", in_channels, 1)
        self.out_channels = int_arg(name, "out_channels", out_channels, 1)
        self.num_terms = int_arg(name, "num_terms", num_terms, 1)
        self.low_rank = int_arg(name, "low_rank", low_rank, 1)
        _float_dtype(name, dtype)
        self.kernel_size = _pair(name, "kernel_size", kernel_size, 1)
        self.stride = _pair(name, "stride", stride, 1)
        if padding == "same":  # Panther's (k - 1) // 2; an even kernel's as torch pads it (the extra at the end)
            if self.stride != (1, 1):
                raise ValueError(f"[{name}] padding: 'same' needs stride 1 (as torch's conv2d), got {self.stride}")
            odd = all(k % 2 for k in self.kernel_size)
            self.padding = tuple((k - 1) // 2 for k in self.kernel_size) if odd else "same"
        elif padding == "valid":
            self.padding = (0, 0)
        elif isinstance(padding, str):
            raise ValueError(f"[{name}] padding: expected 'same', 'valid', an int or a pair, got {padding!r}")
        else:
            self.padding = _pair(name, "padding", padding, 0)
        kw = {"dtype": dtype, "device": device}
        terms, r = 2 * self.num_terms, self.low_rank
        if seed is None:
            self.register_buffer("U1s", torch.stack([_signs(r, self.out_channels, **kw) for _ in range(terms)]))
        else:
            self._set_seed(int_arg(name, "seed", seed, 0, _MASK63), device)
        if layer is None:
            kernels = torch.empty(self.in_channels, *self.kernel_size, self.out_channels, **kw)
            init.kaiming_uniform_(kernels, a=math.sqrt(5))
            if bias:
                self.bias = torch.nn.Parameter(torch.empty(self.out_channels, **kw))
                fan_in, _ = init._calculate_fan_in_and_fan_out(kernels)
                init.uniform_(self.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
            else:
                self.register_parameter("bias", None)
        elif isinstance(layer, torch.nn.Conv2d):
            if layer.groups != 1 or tuple(layer.dilation) != (1, 1) or layer.padding_mode != "zeros":
                raise ValueError(f"[{name}] layer: needs groups 1, dilation (1, 1) and padding_mode 'zeros', got "
                                 f"groups {layer.groups}, dilation {layer.dilation}, padding_mode {layer.padding_mode!r}")
            want = (self.out_channels, self.in_channels, *self.kernel_size)
            if tuple(layer.weight.shape) != want:
                raise ValueError(f"[{name}] layer: its weight must be (out_channels, in_channels, *kernel_size) = "
                                 f"{want}, got {tuple(layer.weight.shape)}")
            kernels = layer.weight.detach().clone().permute(1, 2, 3, 0)
            if layer.bias is not None:
                self.bias = torch.nn.Parameter(layer.bias.detach().clone())
            else:
                self.register_parameter("bias", None)
        else:
            raise ValueError(f"[{name}] layer: expected a torch.nn.Conv2d or None, got {type(layer).__name__}")
        u1 = self.operators(kernels.dtype, kernels.device)
        s1 = torch.stack([(kernels @ u1[i].T).reshape(-1, r) for i in range(terms)])      # (L, C·kh·kw, r)
        self.S1s = torch.nn.Parameter(s1.permute(0, 2, 1).reshape(terms * r, self.in_channels, *self.kernel_size))

    @staticmethod
    def fromTorch(layer, num_terms, low_rank, seed=None):  # noqa: N802 (Panther's name)
        """The sketched layer of an nn.Conv2d (its weights, bias, stride and padding)."""
        if not isinstance(layer, torch.nn.Conv2d):
            raise ValueError(f"[SKConv2d] layer: expected a torch.nn.Conv2d, got {type(layer).__name__}")
        return SKConv2d(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride, layer.padding,
                        num_terms=num_terms, low_rank=low_rank, layer=layer, dtype=layer.weight.dtype,
                        device=layer.weight.device, seed=seed)

    def operators(self, dtype=None, device=None):
        """U1s: the stored buffer, or the Rademacher operators of the seed."""
        if "seed" not in self._buffers:
            return self.U1s
        seed = self._seed_value()
        return stacked_operators("rademacher", self.low_rank, self.out_channels, seed, 2 * self.num_terms, 0, 1,
                                 dtype or torch.get_default_dtype(), device or self.seed.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u1 = self.operators(self.S1s.dtype, self.S1s.device)
        return sketched_conv2d(x, self.S1s, u1, self.bias, self.stride, self.padding)
