"""SIGINT/SIGTERM handled on a thread of their own.

A Python signal handler runs in the main thread between any two bytecodes, perhaps while that thread
holds a lock (a process tree's, threading's own while it starts a thread, an Event's). A handler that
then takes the same lock never returns. So the handler only writes the signal number into a pipe (a
system call, no lock) and a relay thread, started before the handlers are installed, does the work.

The kernel hands a process's signal to any of its threads. When it is not the main one, CPython only
sets a flag that the main thread reads when it next runs bytecode: a main thread blocked for good in
waitpid() or on a lock never does, and the signal is lost. So a main thread waiting under the handlers
waits in short ticks (`wait_child`, `wait_event`, `join`). A child's exit is still seen when it comes:
`wait_child` sleeps on the child's pidfd, where Popen.wait(timeout) would poll (up to 50 ms late).
"""
from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
TICK_S = 0.5  # a wait wakes this often, at most (a stop signal handed to another thread is handled then)
log = logging.getLogger(__name__)


def wait_child(proc: subprocess.Popen, timeout: float | None = None) -> int:
    """proc.wait(), waking in ticks: a stop signal handed to another thread is still handled. Where the
    kernel gives a pidfd (Linux 5.3+) the exit wakes it at once. `timeout`: subprocess.TimeoutExpired after it."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here, or the child is reaped already
        fd = None
    try:
        while True:
            code = proc.poll()
            if code is not None:
                return code
            tick = TICK_S if deadline is None else min(TICK_S, deadline - time.monotonic())
            if tick <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            if fd is None:
                try:
                    return proc.wait(timeout=tick)
                except subprocess.TimeoutExpired:
                    continue
            select.select([fd], [], [], tick)
    finally:
        if fd is not None:
            os.close(fd)


def wait_event(event: threading.Event) -> None:
    while not event.wait(TICK_S):
        pass


def join(thread: threading.Thread, tick: float = TICK_S) -> None:
    while thread.is_alive():
        thread.join(tick)


class SignalRelay:
    """`with SignalRelay(on_signal):` calls on_signal(signum) on the relay thread for each signal.

    Outside the main thread (where Python cannot install handlers) it does nothing.
    """

    def __init__(self, on_signal: Callable[[int], None], signals: tuple[int, ...] = STOP_SIGNALS):
        self.on_signal = on_signal
        self.signals = signals
        self.received: int | None = None  # the first signal, set in the handler itself
        self._previous: dict[int, object] = {}
        self._pipe: tuple[int, int] | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "SignalRelay":
        if threading.current_thread() is not threading.main_thread():
            return self
        self._pipe = os.pipe()
        self._thread = threading.Thread(target=self._relay, name="radt-signals", daemon=True)
        self._thread.start()
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._pipe is not None:
            os.write(self._pipe[1], b"\0")  # 0 is no signal: the relay ends
            self._thread.join(2)  # a stop's handling is bounded; never hold up radt-ext's exit for it
            if not self._thread.is_alive():  # else the relay still reads them; they go with the process
                for fd in self._pipe:
                    os.close(fd)
            self._pipe = None

    def _handle(self, signum, _frame) -> None:
        if self.received is None:
            self.received = signum
        os.write(self._pipe[1], bytes([signum]))

    def _relay(self) -> None:
        while True:
            for signum in os.read(self._pipe[0], 64):
                if signum == 0:
                    return
                try:
                    self.on_signal(signum)
                except Exception:  # the next signal must still be relayed
                    log.exception("radt-ext: handling signal %d failed", signum)
