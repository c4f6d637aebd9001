"""Which operations a network runs: one forward pass with hooks on its leaf modules and a
torch-function mode for the functional calls made outside them, deduplicated.

An operation is a leaf module call (or an attention block, whose internals are functional), or a
functional call outside those that makes a new tensor (`torch.cat`, `bmm`, a residual `+`, …).
Calls with the same type, configuration, training flag and input signature are one `OpCall`
with a `count`; its first call's inputs are kept (detached clones, aliasing preserved) so the
operation can be replayed alone.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch import nn

from radt_ext.ops import functional

ATOMIC = (nn.MultiheadAttention,)  # measured as one operation although they have children
VIEWS = (nn.Flatten, nn.Unflatten, nn.Identity)  # no kernel: nothing to measure


@dataclass
class OpCall:
    op: str  # module type, e.g. Conv2d; a functional operation's name, e.g. cat
    name: str  # path of the first module making this call
    params: str  # the module's configuration (extra_repr)
    module: nn.Module | None  # None for a functional operation
    args: tuple
    kwargs: dict
    input_shapes: str  # e.g. "64x3x224x224;64x1000"
    count: int = 1
    order: int = 0
    needs_grad: bool = False  # some input or parameter takes a gradient
    fn: Callable | None = None  # a functional operation's function, called with args and kwargs

    def __call__(self):
        return (self.fn or self.module)(*self.args, **self.kwargs)

    def parameters(self) -> list[torch.Tensor]:
        return list(self.module.parameters()) if self.module is not None else []


def _signature(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        dims = "x".join(str(d) for d in value.shape) or "scalar"
        return f"{dims}:{str(value.dtype).removeprefix('torch.')}{':g' if value.requires_grad else ''}"
    if isinstance(value, (int, float, bool, str, type(None), slice, type(Ellipsis))):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_signature(v) for v in value) + ")"
    return type(value).__name__


def _clone(value: Any, seen: dict[int, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        if id(value) not in seen:
            seen[id(value)] = value.detach().clone().requires_grad_(value.requires_grad)
        return seen[id(value)]
    if isinstance(value, (tuple, list)):
        return type(value)(_clone(v, seen) for v in value)
    return value


def clone_inputs(call: "OpCall") -> tuple[tuple, dict, list[torch.Tensor]]:
    """Fresh copies of a call's saved inputs (aliasing preserved) and those of them that take a gradient."""
    seen: dict[int, torch.Tensor] = {}
    args = tuple(_clone(a, seen) for a in call.args)
    kwargs = {k: _clone(v, seen) for k, v in call.kwargs.items()}
    return args, kwargs, [t for t in seen.values() if t.requires_grad]


def leaf_modules(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """Leaf modules (and atomic blocks) in definition order, skipping views."""
    skip: list[str] = []
    for name, module in model.named_modules():
        if any(name.startswith(s + ".") for s in skip):
            continue
        if isinstance(module, ATOMIC):
            skip.append(name)
            yield name, module
        elif not any(True for _ in module.children()) and not isinstance(module, VIEWS):
            yield name, module


def _shapes(args: tuple, kwargs: dict) -> str:
    shapes = ";".join(_signature(a) for a in args)
    if kwargs:
        shapes += ";" + ";".join(f"{k}={_signature(v)}" for k, v in sorted(kwargs.items()))
    return shapes


def capture(model: nn.Module, inputs: tuple, grad: bool, kwargs: dict | None = None) -> list[OpCall]:
    """Run `model(*inputs, **kwargs)` once and return its distinct operations in first-call order: leaf modules
    (and atomic blocks) and the functional operations run outside them (see `functional`)."""
    found: dict[tuple, OpCall] = {}
    where: list[str] = []  # the modules being run, outermost first

    def record(key, make) -> None:
        if key in found:
            found[key].count += 1
            return
        call = make()
        call.order = len(found)
        found[key] = call

    def keep(args, kwargs):
        seen: dict[int, torch.Tensor] = {}
        args_c = tuple(_clone(a, seen) for a in args)
        kwargs_c = {k: _clone(v, seen) for k, v in kwargs.items()}
        return args_c, kwargs_c, grad and any(t.requires_grad for t in seen.values())

    def leaf_pre(name):
        def pre(module, args, kwargs):
            recorder.depth += 1  # first: what this hook runs is not the network's
            shapes, params = _shapes(args, kwargs), module.extra_repr()

            def make():
                args_c, kwargs_c, needs = keep(args, kwargs)
                needs = needs or (grad and any(p.requires_grad for p in module.parameters()))
                return OpCall(op=type(module).__name__, name=name, params=params, module=module, args=args_c,
                              kwargs=kwargs_c, input_shapes=shapes, needs_grad=needs)
            record((type(module).__name__, params, shapes, module.training), make)
        return pre

    def leaf_post(module, args, output):
        recorder.depth -= 1

    def functional_call(func, args, kwargs):
        op, shapes = functional.label(func), _shapes(args, kwargs)

        def make():
            args_c, kwargs_c, needs = keep(args, kwargs)
            name = ".".join(n for n in (where[-1] if where else "", op) if n)
            return OpCall(op=op, name=name, params="", module=None, fn=func, args=args_c, kwargs=kwargs_c,
                          input_shapes=shapes, needs_grad=needs)
        record(("fn", op, shapes, grad), make)

    recorder = functional.Recorder(functional_call)
    handles = []
    leaves = dict(leaf_modules(model))
    for name, module in model.named_modules():
        if name in leaves:
            handles.append(module.register_forward_pre_hook(leaf_pre(name), with_kwargs=True))
            handles.append(module.register_forward_hook(leaf_post, always_call=True))
        elif not any(name.startswith(s + ".") for s in leaves):
            handles.append(module.register_forward_pre_hook(lambda m, a, n=name: where.append(n)))
            handles.append(module.register_forward_hook(lambda m, a, o: where.pop() and None, always_call=True))
    try:
        with torch.set_grad_enabled(grad), recorder:
            model(*inputs, **(kwargs or {}))
    finally:
        for h in handles:
            h.remove()
    return list(found.values())


@contextlib.contextmanager
def out_of_place(module: nn.Module | None) -> Iterator[nn.Module | None]:
    """Replay an in-place module (ReLU(inplace=True)) out of place: a replayed input is reused."""
    was = getattr(module, "inplace", None)
    if was:
        module.inplace = False
    try:
        yield module
    finally:
        if was:
            module.inplace = was


tensors = functional.flat_tensors
