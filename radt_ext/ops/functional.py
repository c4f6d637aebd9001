"""Functional operations a network runs outside its leaf modules: `torch.cat`, `stack`, `bmm`, `+`,
indexing, a copying `reshape`, … seen through a `TorchFunctionMode` during the capture pass.

A call is kept when it makes a new tensor (a kernel runs); one whose every output shares storage
with an input is a view (`view`, `transpose`, `expand`, basic slicing) and launches nothing. An
in-place call (`out += identity`) is kept and replayed through its out-of-place form, as in-place
modules are: a replayed input is reused, and a leaf that takes a gradient cannot change in place.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode


def flat_tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor in a value (a tensor, or nested tuples/lists of them and of anything else)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat_tensors(v)]
    return []


def label(func: Callable) -> str:
    """`__iadd__`, `__add__`, `__radd__`, `add_` and `add` are all `add`; `__getitem__` is `getitem`."""
    name = getattr(func, "__name__", type(func).__name__)
    if name.startswith("__") and name.endswith("__"):
        name = name[2:-2]
        if name.startswith("i") and hasattr(torch.Tensor, f"__{name[1:]}__"):
            name = name[1:]
        elif name.startswith("r") and hasattr(torch.Tensor, f"__{name[1:]}__"):
            name = name[1:]
    elif name.endswith("_") and not name.startswith("_"):
        name = name[:-1]
    return name


def out_of_place(func: Callable) -> Callable | None:
    """The out-of-place form of an in-place function (`Tensor.__iadd__` → `Tensor.__add__`), else None."""
    name = getattr(func, "__name__", "")
    if name.startswith("__i") and name.endswith("__"):
        found = getattr(torch.Tensor, f"__{name[3:]}", None)
    elif name.endswith("_") and not name.startswith("_"):
        found = getattr(torch.Tensor, name[:-1], None)
    else:
        return None
    return found if callable(found) else None


def _storages(ts: list[torch.Tensor]) -> set[int]:
    out = set()
    for t in ts:
        try:
            out.add(t.untyped_storage().data_ptr())
        except (RuntimeError, NotImplementedError):  # no storage (a tensor subclass): treat as new
            pass
    return out


def makes_new_tensor(args: tuple, kwargs: dict, out: Any) -> bool:
    outs = flat_tensors(out)
    if not outs:
        return False
    ins = _storages(flat_tensors([*args, *kwargs.values()]))
    return any(s not in ins for s in _storages(outs))


class Recorder(TorchFunctionMode):
    """Calls `on_call(func, args, kwargs)` for each torch function that runs while `depth == 0` (not inside
    a leaf module) and makes a new tensor or changes one in place; `func` is what replays it."""

    def __init__(self, on_call: Callable[[Callable, tuple, dict], None]):
        super().__init__()
        self.on_call = on_call
        self.depth = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.depth == 0:
            replay = out_of_place(func)
            if replay is not None and flat_tensors(out):
                self.on_call(replay, args, kwargs)
            elif makes_new_tensor(args, kwargs, out):
                self.on_call(func, args, kwargs)
        return out
