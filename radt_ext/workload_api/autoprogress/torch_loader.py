"""PyTorch optimizer steps and data-loader passes: `steps`, `train_batches` / `train_samples`,
`eval_batches` / `eval_samples`, `unsized_batches`, `epochs` and the epoch marks of source `torch`.

A pass is one iteration over a DataLoader: it starts at `iter(loader)` (DataLoader.__iter__, which
subclasses such as accelerate's reach through super()), yields batches (_BaseDataLoaderIter.__next__,
the same for one worker or many) and ends at StopIteration, or, when its iterator is dropped or restarted
after it yielded as many batches as the loader has (Lightning never asks for more), at its last step
after its last batch. An iterator dropped or restarted earlier closes its pass unfinished. Each batch's size is the leading dimension of its first tensor
(batches.py).

A pass is a training pass when an optimizer step (torch's global step post-hook) follows batches it
yielded; then all its batches are training batches, it is an epoch (`epochs` counts the training passes
that reached their end) and it gets epoch marks: `start` stamped with the pass's start, written when
it is first known to be training, `end` stamped with its end, written then (at StopIteration) or when
its iterator goes. Which pass a step belongs to:

- the open passes that yielded since the previous step, with gradients on when they did: every one of
  them (several loaders zipped), those already training aside;
- else the last pass that ended since the previous step without a step yet (a prefetching wrapper,
  Lightning's or accelerate's, reads a loader to its end before the step of its last batch), unless a
  training pass is still open (validation run inside a training pass).

A pass that yields with gradients off (`torch.no_grad()`, inference mode: Lightning's validation, most
evaluation loops) is an evaluation pass at once. Otherwise its batches wait until a step makes it
training or it ends, closes, or waits PENDING_BATCHES batches or PENDING_S seconds without a step (then
evaluation, and its later batches count at once); what still waits at exit is evaluation. At each step,
torch_forward.py takes the step's samples from the model's input (a loop fed without a loader). Imports
torch (only once the script has), batches.py, guard.py, records.py and torch_forward.py.
"""
from __future__ import annotations

import functools
import time
import weakref

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import DataLoader
from torch.utils.data.dataloader import _BaseDataLoaderIter

from radt_ext.workload_api.autoprogress import torch_forward
from radt_ext.workload_api.autoprogress.batches import leading_dim
from radt_ext.workload_api.autoprogress.guard import Hook
from radt_ext.workload_api.autoprogress.records import after_fork, before_exit, counter

SRC = "torch"
PENDING_BATCHES = 64
PENDING_S = 30.0
RECENT_MAX = 16  # passes kept track of (open, or ended with their batches still waiting)
ATTR = "_radt_ext_pass"  # on a loader iterator: its current pass
KEYS = {"train": ("train_batches", "train_samples"), "eval": ("eval_batches", "eval_samples")}
_is_compiling = torch.compiler.is_compiling


class Pass:
    __slots__ = ("t_start", "t_end", "t_yield", "t_step", "t_wait", "length", "yielded", "seq", "grad", "state",
                 "ended", "epoch", "batches", "samples", "unsized", "ref", "__weakref__")

    def __init__(self, now: float, length: int | None):
        self.t_start, self.t_end, self.t_yield, self.t_step, self.t_wait = now, 0.0, now, 0.0, 0.0
        self.length = length  # batches in a full pass (None: unknown, an iterable dataset)
        self.yielded = 0
        self.seq = 0  # the number of the last batch it yielded, over all passes
        self.grad = True  # gradients were on when it last yielded
        self.state = "pending"  # then "train" or "eval"
        self.ended = False
        self.epoch = 0
        self.batches = self.samples = self.unsized = 0  # waiting for the pass to be known
        self.ref = None


class Loaders:
    """This process's passes and the step that last credited one."""

    def __init__(self):
        self.counter = counter(SRC)
        self.recent: list[Pass] = []
        self.seq = 0
        self.step_seq = 0

    def reset(self) -> None:
        self.recent, self.seq, self.step_seq = [], 0, 0

    # -- events ------------------------------------------------------------------------------

    def start(self, it, now: float) -> Pass:
        old = it.__dict__.get(ATTR)
        if old is not None:  # a persistent-worker iterator starting its next pass
            self.close(old, now)
        self.settle_ended(now)
        try:
            length = len(it)
        except TypeError:
            length = None
        p = Pass(now, length)
        p.ref = weakref.ref(it, lambda _, p=p: self.gone(p))
        it.__dict__[ATTR] = p
        self.recent.append(p)
        if len(self.recent) > RECENT_MAX:
            self.close(self.recent[0], now)
        return p

    def batch(self, it, batch) -> None:
        now = time.time()
        p = it.__dict__.get(ATTR) or self.start(it, now)
        n = leading_dim(batch)
        self.seq += 1
        p.seq, p.t_yield = self.seq, now
        p.yielded += 1
        p.grad = torch.is_grad_enabled()
        if len(self.recent) > 1:
            self.settle_ended(now, keep=p)
        if p.state == "pending" and not p.grad:
            self.settle(p, "eval", now)
        if p.state != "pending":
            self.count(p.state, n, now)
            return
        if not p.batches:
            p.t_wait = now
        p.batches += 1
        if n is None:
            p.unsized += 1
        else:
            p.samples += n
        if p.batches >= PENDING_BATCHES or now - p.t_wait >= PENDING_S:
            self.settle(p, "eval", now)

    def end(self, it) -> None:
        p = it.__dict__.get(ATTR)
        if p is None or p.ended:
            return
        now = time.time()
        p.ended, p.t_end = True, now
        if p.state == "train":
            self.finish_epoch(p)
        elif p.state == "eval":
            self.drop(p)
        # a pass still pending stays: the step of its last batch may come after its end

    def step(self, now: float) -> None:
        """An optimizer step: make the passes it belongs to training passes (its count is the caller's)."""
        since = [p for p in self.recent if p.seq > self.step_seq and p.grad and p.state != "train"]
        self.step_seq = self.seq
        live = [p for p in since if not p.ended]
        if live:
            for p in live:
                self.promote(p, now)
        else:
            ended = [p for p in since if p.state == "pending"]
            if ended and not any(p.state == "train" and not p.ended for p in self.recent):
                self.promote(max(ended, key=lambda p: p.seq), now)
        self.settle_ended(now)
        for p in self.recent:
            if p.state == "train":
                p.t_step = now

    def after_step(self) -> None:
        """A training pass that has yielded all its batches may get no StopIteration (Lightning): its
        totals go out at each of its last steps, so the epoch's samples are exact at its end."""
        for p in self.recent:
            if p.state == "train" and p.length and p.yielded >= p.length:
                self.counter.write()
                return

    def gone(self, p: Pass) -> None:
        """The pass's iterator was garbage-collected."""
        if p in self.recent and HOOK.on:
            try:
                self.close(p, time.time())
            except Exception as exc:  # noqa: BLE001 - a callback of the collector: never raise
                HOOK.fail(exc)

    # -- bookkeeping -------------------------------------------------------------------------

    def count(self, kind: str, n: int | None, now: float, batches: int = 1, unsized: int = 0) -> None:
        values = self.counter.values
        batches_key, samples_key = KEYS[kind]
        values[batches_key] += batches
        if n is None:
            values["unsized_batches"] += batches
        else:
            values[samples_key] += n
            values["unsized_batches"] += unsized
        self.counter.touch(now)

    def settle(self, p: Pass, state: str, now: float) -> None:
        """The pass's waiting batches become `state` batches."""
        if p.batches:
            self.count(state, p.samples, now, p.batches, p.unsized)
        p.batches = p.samples = p.unsized = 0
        p.state = state
        if p.ended and state == "eval":
            self.drop(p)

    def promote(self, p: Pass, now: float) -> None:
        c = self.counter
        c.epoch += 1
        p.epoch = c.epoch
        c.mark(p.epoch, "start", p.t_start)  # the totals before its batches, at its start
        self.settle(p, "train", now)
        if p.ended:
            self.finish_epoch(p)

    def finish_epoch(self, p: Pass) -> None:
        c = self.counter
        c.values["epochs"] += 1
        c.last = max(c.last, p.t_end)
        c.mark(p.epoch, "end", p.t_end)
        self.drop(p)

    def settle_ended(self, now: float, keep: Pass | None = None) -> None:
        for p in [p for p in self.recent if p.ended and p.state == "pending" and p is not keep]:
            self.settle(p, "eval", now)

    def close(self, p: Pass, now: float) -> None:
        """The pass's iterator is dropped or restarted. A training pass that had yielded all its batches
        reached its end (Lightning reads no further than the loader's length): an epoch that ended at
        its last step, or its last batch; any other is unfinished. What still waits is evaluation."""
        if p.state == "pending":
            self.settle(p, "eval", now)
        elif p.state == "train" and not p.ended and p.length and p.yielded >= p.length:
            p.ended, p.t_end = True, max(p.t_yield, p.t_step)
            self.finish_epoch(p)
        self.drop(p)

    def drop(self, p: Pass) -> None:
        if p in self.recent:
            self.recent.remove(p)

    def at_exit(self) -> None:
        now = time.time()
        for p in list(self.recent):
            self.close(p, now)


HOOK = Hook("torch-loader", SRC)
STEPS = Hook("torch-steps", SRC)
_loaders: Loaders | None = None


def install() -> None:
    global _loaders
    _loaders = loaders = Loaders()
    before_exit(lambda: HOOK.on and loaders.at_exit())
    after_fork(loaders.reset)
    HOOK.patch(DataLoader, "__iter__", _iter)
    HOOK.patch(_BaseDataLoaderIter, "__next__", _next)
    handle = register_optimizer_step_post_hook(_on_step)
    STEPS.undo(handle.remove)


def _iter(original):
    @functools.wraps(original)
    def __iter__(self):
        it = original(self)
        if HOOK.on and isinstance(it, _BaseDataLoaderIter) and not _is_compiling():
            try:
                _loaders.start(it, time.time())
            except Exception as exc:  # noqa: BLE001 - never into the script
                HOOK.fail(exc)
        return it
    return __iter__


def _next(original):
    @functools.wraps(original)
    def __next__(self):
        try:
            batch = original(self)
        except StopIteration:
            if HOOK.on and not _is_compiling():
                HOOK.call(_loaders.end, self)
            raise
        if HOOK.on and not _is_compiling():
            HOOK.call(_loaders.batch, self, batch)
        return batch
    return __next__


def _on_step(optimizer, args, kwargs) -> None:
    if _is_compiling() or not STEPS.on:
        return
    try:
        STEPS.check_fault()
        now = time.time()
        if HOOK.on:
            try:
                _loaders.step(now)
            except Exception as exc:  # noqa: BLE001 - the loader hook goes; steps go on counting
                HOOK.fail(exc)
        if torch_forward.HOOK.on:  # the step's samples where no loader feeds it
            torch_forward.HOOK.call(torch_forward.step_hook, optimizer)
        _loaders.counter.add(now, "steps")
        if HOOK.on:
            HOOK.call(_loaders.after_step)
    except Exception as exc:  # noqa: BLE001 - never into the script
        STEPS.fail(exc)
