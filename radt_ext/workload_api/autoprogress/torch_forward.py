"""Calls of the outermost PyTorch modules, of source `torch`:

- `forwards` and `forward_samples`: the calls of the *model*, the first outermost module the script
  called, and the samples in them (the leading dimension of the call's first tensor argument, positional
  first, then keyword): one count per step of a loop that calls several top-level modules a step (a
  decoder stepping through a ModuleList of layers from the script counts its embedding's calls, not each
  layer's); `other_models` and `other_calls`: the other outermost modules and their calls;
- `step_samples` (`step_hook`, called at each optimizer step): the samples of a training loop fed
  without a data loader. At a step, the outermost modules the optimizer steps (holding one of its
  parameters) that were called with gradients on since the previous step are looked at; the first of
  them called gives the step its samples, the leading dimensions of its calls since then (gradient
  accumulation adds up; a call under no_grad, an evaluation, is none of it). `unsized_steps`: steps
  whose model was called with no tensor to size.

An outermost module is one whose call is not inside another module's call. Every module gets, when it
is made (Module.__init__, or __setstate__ when unpickled or deep-copied), a wrapper in the instance slot
`_compiled_call_impl`, which Module.__call__ calls instead of `_call_impl` when set (that is what
`Module.compile()` uses it for; Module.__getstate__ leaves it out of pickles and copies). At the
module's first call the wrapper decides:

- called inside another module's call, or holding no parameters (a loss): the wrapper goes, the module
  runs as if never touched;
- else it is an outermost module: the wrappers of its submodules go, and its own counts each call made
  outside any other counted call;
- an outermost module other than the model, decided while no optimizer exists in the process (inference,
  a decoder stepping through its layers from the script), loses its wrapper too: its calls could only
  ever count as `other_calls`, and a wrapper costs 1-2 microseconds a call
  (benchmarks/sampling/hook_calls.py). The first optimizer made wraps those modules again (their calls
  with gradients on give a step its samples), so `other_calls` counts the calls made since an optimizer
  exists.

So only the model and, where something trains, the other outermost modules keep a wrapper, and a call
costs them one Python call and two additions (no hook dict, no slow path of _call_impl, nothing for their
submodules); the clock is read every few calls only (adaptive: about every 10 to 100 ms).
torch.compile(model)'s OptimizedModule is the outermost module and is counted outside the compiled code;
dynamo never traces the wrappers (it calls `_call_impl` itself), so no graph break and no recompile. Calls
made inside compiled code are not seen. Imports torch (only once the script has), batches.py, guard.py and
records.py.
"""
from __future__ import annotations

import functools
import time
import weakref
from weakref import WeakKeyDictionary

import torch
from torch import nn

from radt_ext.workload_api.autoprogress.batches import leading_dim
from radt_ext.workload_api.autoprogress.guard import Hook
from radt_ext.workload_api.autoprogress.records import after_fork, before_exit, counter

SRC = "torch"
SLOT = "_compiled_call_impl"
TICK_FAST_S, TICK_SLOW_S, EVERY_MAX = 0.01, 0.1, 1024
HOOK = Hook("torch-forward", SRC)
_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_grad_on = torch.is_grad_enabled


class _State:
    depth = 0  # counted calls under way (outermost modules' calls nest only when one calls another)
    every = 1  # calls between two looks at the clock
    left = 1
    tick_t = 0.0
    seq = 0  # counted calls so far: which module of a step was called first
    entry = None  # the model's _Calls: the first outermost module called
    prune_at = 64  # _modules is rid of dead modules when it grows past this
    trains = False  # an optimizer was made in this process


class _Calls:
    """One outermost module's calls with gradients on since the last optimizer step that stepped it."""
    __slots__ = ("ref", "calls", "samples", "first", "__weakref__")

    def __init__(self, module):
        self.ref = weakref.ref(module)
        self.calls = self.samples = 0
        self.first = 0  # _S.seq of the first of those calls


_S = _State()
_counter = counter(SRC)
_values = _counter.values
_modules: list[_Calls] = []  # the outermost modules, in the order they were first called
_stepped: WeakKeyDictionary = WeakKeyDictionary()  # optimizer -> (its parameters' shape, their ids, {_Calls: bool})


def install() -> None:
    if SLOT not in vars(nn.Module) or "_wrapped_call_impl" not in vars(nn.Module):
        raise RuntimeError(f"this torch {torch.__version__} calls modules without `{SLOT}`")
    HOOK.patch(nn.Module, "__init__", _init)
    HOOK.patch(nn.Module, "__setstate__", _init)
    HOOK.patch(nn.Module, "compile", _compile)
    HOOK.patch(torch.optim.Optimizer, "__init__", _optimizer_init)
    before_exit(_last_calls)
    after_fork(_reset)


def _init(original):
    @functools.wraps(original)
    def wrapped(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if HOOK.on and not _is_compiling():
            try:
                if self.__dict__.get(SLOT) is None:
                    self.__dict__[SLOT] = _candidate(self)
            except Exception as exc:  # noqa: BLE001 - never into the script
                HOOK.fail(exc)
    return wrapped


def _compile(original):
    @functools.wraps(original)
    def compile(self, *args, **kwargs):  # Module.compile() takes the slot: ours goes around its compiled call
        mine = self.__dict__.get(SLOT)
        original(self, *args, **kwargs)
        inner = self.__dict__.get(SLOT)
        if HOOK.on and getattr(mine, "radt_ext_inner", False) is not False and inner is not mine:
            try:
                root = mine.radt_ext_root
                self.__dict__[SLOT] = _counted(self, inner, root) if root else _candidate(self, inner)
            except Exception as exc:  # noqa: BLE001 - never into the script
                HOOK.fail(exc)
    return compile


def _optimizer_init(original):
    @functools.wraps(original)
    def wrapped(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if HOOK.on and not _S.trains:
            try:
                _wake()
            except Exception as exc:  # noqa: BLE001 - never into the script
                HOOK.fail(exc)
    return wrapped


def _wake() -> None:
    """Something trains: the outermost modules left without a wrapper count their calls again."""
    _S.trains = True
    for mine in _modules:
        m = mine.ref()
        if m is not None:
            impl = m.__dict__.get(SLOT)  # none, or its own compiled call
            if getattr(impl, "radt_ext_inner", False) is False:
                m.__dict__[SLOT] = _counted(m, impl, mine)


def _candidate(module, inner=None):
    """The wrapper of a module not called yet: its first call decides whether it is outermost."""
    ref = weakref.ref(module)

    def call(*args, **kwargs):
        m = ref()
        if _is_compiling():
            return (inner or m._call_impl)(*args, **kwargs)
        if HOOK.on:
            try:
                HOOK.check_fault()
                _decide(m, inner)
            except Exception as exc:  # noqa: BLE001 - never into the script
                HOOK.fail(exc)
        impl = m.__dict__.get(SLOT)
        if impl is call:  # the hook was removed before it decided
            _unwrap(m)
            impl = inner
        return (impl or m._call_impl)(*args, **kwargs)

    call.radt_ext_inner, call.radt_ext_root = inner, None
    return call


def _decide(m, inner) -> None:
    if _S.depth or next(m.parameters(), None) is None:
        _unwrap(m)
        return
    for sub in m.modules():
        if sub is not m:
            _unwrap(sub)
    mine = _Calls(m)
    if len(_modules) >= _S.prune_at:
        _modules[:] = [c for c in _modules if c.ref() is not None]
        _S.prune_at = max(64, 2 * len(_modules))
    _modules.append(mine)
    if _S.entry is None or _S.entry.ref() is None:  # the model: the first outermost module (while it lives)
        _S.entry = mine
    else:
        _values["other_models"] += 1
        if not _S.trains:  # its calls would count for nothing: no wrapper until an optimizer is made
            _unwrap(m)
            return
    m.__dict__[SLOT] = _counted(m, inner, mine)


def _counted(module, inner, mine: _Calls):
    """The wrapper of an outermost module: counts its calls made outside any other counted call."""
    ref = weakref.ref(module)
    call_impl = type(module)._call_impl  # unbound: no bound method made per call

    def call(*args, **kwargs):
        m = ref()
        if not HOOK.on:
            _unwrap(m)
        elif not _S.depth and not _is_compiling():
            try:
                a = args[0] if args else None
                if type(a) is _Tensor:
                    shape = a.shape
                    n = shape[0] if shape else None
                else:
                    n = leading_dim(args)
                    if n is None and kwargs:
                        n = leading_dim(kwargs)
                sized = type(n) is int  # not a size traced by torch.jit.trace
                if mine is _S.entry:
                    _values["forwards"] += 1
                    if sized:
                        _values["forward_samples"] += n
                else:
                    _values["other_calls"] += 1
                if _grad_on():  # a training call: the samples of the next optimizer step that steps it
                    if not mine.calls:
                        mine.first = _S.seq
                    mine.calls += 1
                    if sized:
                        mine.samples += n
                _S.seq += 1
                _S.left -= 1
                if _S.left <= 0:
                    _tick()
            except Exception as exc:  # noqa: BLE001 - never into the script
                HOOK.fail(exc)
        _S.depth += 1
        try:
            if inner is None:
                return call_impl(m, *args, **kwargs)
            return inner(*args, **kwargs)
        finally:
            _S.depth -= 1

    call.radt_ext_inner, call.radt_ext_root = inner, mine
    return call


def step_hook(optimizer) -> None:
    """At an optimizer step (torch_loader's step post-hook calls it before counting the step): the
    step's samples from the first-called of the outermost modules it steps (module docstring)."""
    groups = optimizer.param_groups
    shape = tuple(len(g["params"]) for g in groups)
    known = _stepped.get(optimizer)
    if known is None or known[0] != shape:
        known = _stepped[optimizer] = (shape, {id(p) for g in groups for p in g["params"]}, {})
    _, ids, verdicts = known
    lead = None
    stepped = []
    for c in _modules:
        if not c.calls:
            continue
        hit = verdicts.get(c)
        if hit is None:
            m = c.ref()
            hit = verdicts[c] = m is not None and any(id(p) in ids for p in m.parameters())
        if hit:
            stepped.append(c)
            if lead is None or c.first < lead.first:
                lead = c
    if lead is None:
        return
    if lead.samples:
        _values["step_samples"] += lead.samples
    else:
        _values["unsized_steps"] += 1
    for c in stepped:
        c.calls = c.samples = 0


def _unwrap(m) -> None:
    """The module's call as it was before us (its own compiled call, or none)."""
    impl = m.__dict__.get(SLOT)
    inner = getattr(impl, "radt_ext_inner", False)
    if inner is False:
        return
    if inner is None:
        del m.__dict__[SLOT]
    else:
        m.__dict__[SLOT] = inner


def _tick() -> None:
    """Look at the clock; look less often while calls come fast, more often when they are slow."""
    now = time.time()
    gap = now - _S.tick_t
    if gap < TICK_FAST_S:
        _S.every = min(_S.every * 2, EVERY_MAX)
    elif gap > TICK_SLOW_S and _S.every > 1:
        _S.every //= 2
    _S.left, _S.tick_t = _S.every, now
    _counter.touch(now)


def _last_calls() -> None:
    """At exit: the calls since the last look at the clock, stamped with that look."""
    if _S.left < _S.every:
        _counter.dirty = True
        _S.left = _S.every


def _reset() -> None:
    _S.depth, _S.every, _S.left, _S.tick_t = 0, 1, 1, 0.0
    for c in _modules:
        c.calls = c.samples = 0
