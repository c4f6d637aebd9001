"""The monitor: one thread per listener, each sampling at its own interval.

Readings go to a sink (the recorder: writer + summaries). A listener that fails
to open, or fails `MAX_FAILURES` samples in a row, is stopped and its error kept
for the run's tags; the other listeners and the workload carry on.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from listeners.base import Listener, Reading

log = logging.getLogger(__name__)

MAX_FAILURES = 3
FINAL_GAP_S = 0.02  # a last reading closer than this to the previous one would repeat it (same ms, 0 % CPU)
Sink = Callable[[str, Reading], None]  # (listener name, reading)


@dataclass
class ListenerState:
    listener: Listener
    samples: int = 0
    last_sample_at: float = float("-inf")  # time.monotonic() of the last successful sample
    error: str | None = None  # the last failure, kept even if the listener recovered
    gave_up: bool = False


class Monitor:
    def __init__(self, listeners: list[Listener], sink: Sink, final_gap: float = FINAL_GAP_S):
        self.states = {lst.name: ListenerState(lst) for lst in listeners}
        self.sink = sink
        self.final_gap = final_gap
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sink_lock = threading.Lock()
        self._closed = False  # stop() returned: the writer may be closed, the summary taken

    def start(self) -> "Monitor":
        for state in self.states.values():
            thread = threading.Thread(target=self._run, args=(state,), name=f"radt-{state.listener.name}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._sink_lock:  # a thread still hung in a listener call must not add readings after this
            self._closed = True

    @property
    def errors(self) -> dict[str, str]:
        return {name: s.error for name, s in self.states.items() if s.error}

    def _run(self, state: ListenerState) -> None:
        listener = state.listener
        try:
            listener.open()
        except Exception as exc:
            self._fail(state, "open", exc)
            state.gave_up = True
            try:  # release what it opened before failing (an NVML init, a tool process)
                listener.close()
            except Exception as close_exc:
                log.debug("closing %s after a failed open: %s", listener.name, close_exc)
            return
        try:
            self._sample_loop(state)
        finally:
            # one last reading so counters (energy) cover the whole run
            gap = min(self.final_gap, listener.interval / 2)
            if not state.gave_up and time.monotonic() - state.last_sample_at >= gap:
                self._sample_once(state)
            if not state.gave_up:
                self._sample_once(state, closing=True)
            try:
                listener.close()
            except Exception as exc:
                log.debug("closing %s: %s", listener.name, exc)

    def _sample_loop(self, state: ListenerState) -> None:
        interval = state.listener.interval
        start = time.monotonic()
        tick = 0
        failures = 0
        while not self._stop.is_set():
            if self._sample_once(state):
                failures = 0
            else:
                failures += 1
                if failures >= MAX_FAILURES:
                    state.gave_up = True
                    return
            # absolute schedule: no drift; ticks missed while a sample was slow are skipped
            tick = max(tick + 1, int((time.monotonic() - start) / interval) + 1)
            self._stop.wait(max(0.0, start + tick * interval - time.monotonic()))

    def _sample_once(self, state: ListenerState, closing: bool = False) -> bool:
        try:
            readings = state.listener.closing_sample() if closing else state.listener.sample()
        except Exception as exc:
            self._fail(state, "sample", exc)
            return False
        with self._sink_lock:
            if self._closed:
                return True
            try:
                for reading in readings:
                    self.sink(state.listener.name, reading)
                    state.samples += 1
            except Exception as exc:  # e.g. a value that is not a number: this listener's fault, not fatal
                self._fail(state, "sample", exc)
                return False
        state.last_sample_at = time.monotonic()
        return True

    def _fail(self, state: ListenerState, phase: str, exc: Exception) -> None:
        text = str(exc).splitlines()[0] if str(exc) else ""
        state.error = f"{phase}: {type(exc).__name__}: {text}".rstrip(": ")
        log.warning("listener %s failed (%s)", state.listener.name, state.error)
