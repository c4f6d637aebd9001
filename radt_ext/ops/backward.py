"""An operation's backward, measured so the autograd engine's fixed cost per call is amortised.

Each `torch.autograd.grad` call pays a fixed host cost (tens of µs) that a network's one backward
pass pays once for all its operations. Measuring an operation's backward as its own call would
charge that cost to every operation, so the sum over operations would exceed the network. Here one
call runs the backward of k independent copies of the operation (each with its own inputs and, for
a module, its own parameters) and the time per backward is the call's time / k: the fixed cost is
spread over k backwards while each copy's kernels are those the network runs. Copies rather than k
uses of the same tensors, because gradients flowing into one tensor from k uses would add k - 1
accumulation kernels that the network does not run.
"""
from __future__ import annotations

import copy
import math
import time
from typing import Callable

import torch

from radt_ext.ops.capture import OpCall, clone_inputs, tensors

COPIES = 16  # at most: the fixed cost / 16 is a few µs per backward, below a small kernel's launch
CALL_S = 1e-3  # copies until one call takes about this long: a 1 ms backward needs none
COPY_BUDGET_BYTES = 2 << 30  # and no more copies than fit in this (large tensors: kernel-bound anyway)


def _nbytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _copy(call: OpCall, first: bool):
    """(outputs needing a gradient, tensors to take gradients for) of one fresh copy of the operation."""
    args, kwargs, grads = clone_inputs(call)
    if call.module is not None:
        module = call.module if first else copy.deepcopy(call.module)
        out = module(*args, **kwargs)
        wrt = grads + [p for p in module.parameters() if p.requires_grad]
    else:
        out = call.fn(*args, **kwargs)
        wrt = grads
    return [t for t in tensors(out) if t.requires_grad], wrt


def _grad(outs, wrt) -> Callable[[], object]:
    grads = [torch.randn_like(t) for t in outs]
    return lambda: torch.autograd.grad(outs, wrt, grads, retain_graph=True, allow_unused=True)


def _seconds(fn, sync: Callable[[], None]) -> float:
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def amortised(call: OpCall, sync: Callable[[], None], copies: int = COPIES
              ) -> tuple[Callable[[], object], int, list[torch.Tensor]] | None:
    """(one backward over k copies, k, the first copy's outputs); None when nothing takes a gradient.
    Call under `torch.enable_grad()`; the graphs are kept so the call can be repeated. `sync` waits
    for the device, to time one copy's backward."""
    outs, wrt = _copy(call, first=True)
    if not outs or not wrt:
        return None
    per_copy = _nbytes(outs) + _nbytes(wrt) + _nbytes(t for t in call_tensors(call) if not t.requires_grad)
    one = _seconds(_grad(outs, wrt), sync)
    k = max(1, min(copies, math.ceil(CALL_S / max(one, 1e-9)), COPY_BUDGET_BYTES // max(1, per_copy)))
    all_outs, all_wrt = list(outs), list(wrt)
    for _ in range(k - 1):
        o, w = _copy(call, first=False)
        all_outs += o
        all_wrt += w
    return _grad(all_outs, all_wrt), k, outs


def call_tensors(call: OpCall) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}
    for t in tensors([*call.args, *call.kwargs.values()]):
        seen.setdefault(id(t), t)
    return list(seen.values())
