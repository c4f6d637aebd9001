"""One counter per progress source (`torch`, `keras`, `mlflow-steps`) of this process, and the records it
writes to the progress file: its cumulative totals, epoch marks, `hooked` and `error` records.

Totals are written the way `log_progress` writes its own: at once for the first count (of each counter: the
first optimizer step is the start of the active phase), then at most
every WRITE_EVERY_S seconds, before every epoch mark and at interpreter exit; `t` is the time of the last
counted event, or of the epoch mark it comes with, but never earlier than a totals record already
written (a mark may be stamped in the past: a pass known to be training only at its first step), so that
each process's totals never go down in time. Only counters that are not zero are written. A forked child starts from zero (its
records carry its own pid); imports nothing but the standard library and workload_api.progress.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time

from radt_ext.workload_api.progress import WRITE_EVERY_S, _append

KEYS = ("steps", "train_batches", "train_samples", "eval_batches", "eval_samples", "forwards",
        "forward_samples", "other_models", "other_calls", "step_samples", "unsized_steps", "epochs",
        "unsized_batches")

_counters: dict[str, "Counter"] = {}
_before_exit: list = []  # callables that settle what is still pending (a batch, a pass) before the last write
_after_fork: list = []  # callables that drop a forked child's copy of the parent's state
_state = {"atexit": False}


class Counter:
    """Cumulative counts of one source; `add` is cheap, the writes are throttled."""

    def __init__(self, src: str):
        self.src = src
        self.values = dict.fromkeys(KEYS, 0)
        self.last = 0.0  # time of the last counted event
        self.written = 0.0  # when the totals were last written
        self.latest = 0.0  # the latest `t` written
        self.dirty = False
        self.hooked = False
        self.epoch = 0  # epoch marks written (n of the last start)
        self.lock = threading.Lock()

    def add(self, now: float, key: str, n: int = 1) -> None:
        first = not self.values[key]
        self.values[key] += n
        if first:  # the first step, the first training sample: the active phase starts at its time
            self.last, self.dirty = now, True
            self.write()
        else:
            self.touch(now)

    def touch(self, now: float) -> None:
        """Counts changed at `now`: write them if the last write is WRITE_EVERY_S old."""
        self.last = now
        self.dirty = True
        if now - self.written >= WRITE_EVERY_S:
            self.write()

    def write(self, t: float | None = None) -> None:
        with self.lock:
            self.written = time.time()
            self.dirty = False
            totals = {k: v for k, v in self.values.items() if v}
            if totals:
                self.latest = max(self.last if t is None else t, self.latest)
                _append({"pid": os.getpid(), "t": self.latest, "src": self.src, **totals})

    def flush(self) -> None:
        if self.dirty:
            self.write()

    def mark(self, epoch: int, event: str, t: float) -> None:
        """An epoch mark at `t`, with the totals at that moment written just before it (stamped `t`, or
        the latest totals' time if later)."""
        self.write(t)
        _append({"pid": os.getpid(), "t": t, "src": self.src, "epoch": epoch, "event": event})

    def installed(self) -> None:
        """The source's hook is in: one `hooked` record per process."""
        if not self.hooked:
            self.hooked = True
            _append({"pid": os.getpid(), "t": time.time(), "src": self.src, "hooked": True})

    def error(self, text: str) -> None:
        _append({"pid": os.getpid(), "t": time.time(), "src": self.src, "error": text})


def counter(src: str) -> Counter:
    """This process's counter of `src` (made on first use; the exit flush is registered with it)."""
    found = _counters.get(src)
    if found is None:
        found = _counters[src] = Counter(src)
        if not _state["atexit"]:
            _state["atexit"] = True
            atexit.register(flush_all)
            os.register_at_fork(after_in_child=_forked)
    return found


def before_exit(settle) -> None:
    """Run `settle()` at every flush_all, before the counters are written."""
    _before_exit.append(settle)


def after_fork(reset) -> None:
    """Run `reset()` in a forked child, before it counts anything."""
    _after_fork.append(reset)


def flush_all() -> None:
    """Settle what is pending and write every counter that changed since its last write."""
    for settle in list(_before_exit):
        try:
            settle()
        except Exception:  # noqa: BLE001 - never fail the workload's exit over progress
            pass
    for c in list(_counters.values()):
        try:
            c.flush()
        except Exception:  # noqa: BLE001 - never fail the workload's exit over progress
            pass


def _forked() -> None:
    # A forked child (a data-loader worker, a rank started by fork) counts its own work from zero; it
    # exits through multiprocessing's finalizers rather than atexit, so its last counts go out there.
    for c in _counters.values():
        c.values.update(dict.fromkeys(KEYS, 0))  # in place: the hooks hold this dict
        c.written, c.latest, c.dirty, c.last, c.epoch = 0.0, 0.0, False, 0.0, 0
        c.lock = threading.Lock()
    for reset in _after_fork:
        reset()
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None:
        mp_util.Finalize(None, flush_all, exitpriority=0)
