"""What a benchmark row is: an op on fresh random inputs, against its swisk.reference formulation."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch


@dataclass
class Case:
    op: str                                   # the op's name, for --op
    label: str                                # sizes and settings, e.g. "b1024 256->256 G=5"
    setup: Callable[[torch.device, torch.dtype, torch.Generator], dict]  # fresh random inputs
    run: Callable[[dict], torch.Tensor]       # the swisk op
    reference: Callable[[dict], torch.Tensor]  # the pure-torch formulation
    grads: tuple = ()                         # names of inputs that need gradients (forward+backward rows)
    flops: Optional[float] = None             # dense-equivalent forward FLOPs (achieved TFLOP/s)
    backward_products: int = 2                # the backward's contractions of the forward's size (grad_x and
                                              # the weights' gradient; 1 for a first layer): fwd+bwd FLOPs
    bytes: Optional[float] = None             # minimal forward bytes moved at 4 per element (GB/s in the row's dtype)
    evals: Optional[float] = None             # special-function evaluations per forward (achieved G/s)
    devices: tuple = ("cpu", "cuda", "mps")
    dtypes: dict = field(default_factory=lambda: {"cpu": (torch.float32,), "cuda": (torch.float32, torch.bfloat16),
                                                  "mps": (torch.float32, torch.float16)})
    quick: bool = True                        # part of --quick
    calls: int = 1                            # calls per timed repetition (per-call overhead rows)
    goal: str = ""                            # the goal for this row, quoted in the table
    targets: tuple = ()                       # the goal, checked: "[device: ]row_key >= value" or "<= value"
    useful_flops: Optional[float] = None      # forward FLOPs on non-zero operands only (useful TFLOP/s)
    route: str = ""                           # the route the swisk side is pinned to ("" : the op's own)
    info: Optional[Callable] = None           # (inputs, device) -> extra row fields (e.g. the auto route)
    tf32: bool = False                        # both sides with torch.backends.cuda.matmul.allow_tf32 set
    around: Optional[Callable] = None         # () -> a context manager the swisk side's whole step runs in
                                              # (forward and backward: settings the backward reads too)
