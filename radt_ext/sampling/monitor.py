"""The monitor: one thread samples every listener, each at its own interval.

One thread, not one per listener: each wake-up of a sleeping thread costs more CPU than the
readings it takes (the core's caches are cold again after every sleep, measured in
docs/benchmarks), so the listeners due at the same moment are read in one wake-up. Listeners open
side by side, each in a short-lived thread, and each is sampled from the moment it is open.
Streaming listeners (nvidia-smi, dcgmi, perf) read their tool in a thread of their own and only
hand over their queue here. The price: a listener call that hangs holds up the others' samples until
it returns (a hung driver call would hold up every NVML listener anyway); stop() still returns on time.

Readings go to a sink (the recorder: writer + summaries). A listener that fails to open, or
fails `MAX_FAILURES` samples in a row, is stopped, closed and its error kept for the run's tags;
the other listeners and the workload carry on.
"""
from __future__ import annotations

import heapq
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

from listeners.base import Listener, Reading

log = logging.getLogger(__name__)

MAX_FAILURES = 3
OPEN_GRACE_S = 10.0  # at stop, how long a listener still opening is waited for, to be closed
FINAL_GAP_S = 0.02  # a last reading closer than this to the previous one would repeat it (same ms, 0 % CPU)
Sink = Callable[[str, Reading], None]  # (listener name, reading)


@dataclass
class ListenerState:
    listener: Listener
    samples: int = 0
    last_sample_at: float = float("-inf")  # time.monotonic() of the last successful sample
    error: str | None = None  # the last failure, kept even if the listener recovered
    gave_up: bool = False
    closed: bool = False
    failures: int = 0  # failed samples in a row
    start: float = 0.0  # time.monotonic() its schedule counts from
    tick: int = 0  # its last scheduled tick


class Doorbell:
    """Wakes the sampling thread early (stop, a listener now open); its wait costs one lock acquire.

    An Event's wait builds a new lock and a condition on every call: at ten waits a second that is
    measurable against the readings themselves. A ring before the wait is kept, so none is lost.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._lock.acquire()

    def ring(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # rung already, not yet heard
            pass

    def wait(self, timeout: float | None) -> None:
        self._lock.acquire(timeout=-1 if timeout is None else timeout)


class Monitor:
    def __init__(self, listeners: list[Listener], sink: Sink, final_gap: float = FINAL_GAP_S):
        self.states = {lst.name: ListenerState(lst) for lst in listeners}
        self.sink = sink
        self.final_gap = final_gap
        self._stop = threading.Event()
        self._wake = Doorbell()  # rung by stop() and by each listener once it is open
        self._threads: list[threading.Thread] = []
        self._sink_lock = threading.Lock()
        self._closed = False  # stop() returned: the writer may be closed, the summary taken
        self.defer_close = False  # stop(defer_close=True): the listeners close after stop() returns
        self._closers: list[threading.Thread] = []

    def start(self) -> "Monitor":
        thread = threading.Thread(target=self._run, name="radt-monitor", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self, timeout: float = 10.0, defer_close: bool = False) -> None:
        """Every listener's last readings taken, then closed (`defer_close`: closing, wait_closed waits)."""
        self.defer_close = defer_close
        self._stop.set()
        self._wake.ring()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._sink_lock:  # a thread still hung in a listener call must not add readings after this
            self._closed = True

    @property
    def errors(self) -> dict[str, str]:
        return {name: s.error for name, s in self.states.items() if s.error}

    def _run(self) -> None:
        # listeners open side by side (nvidia-smi's first line, an NVML init take a while); each is
        # sampled from the moment it is open
        opened: queue.SimpleQueue[ListenerState | None] = queue.SimpleQueue()
        openers = [threading.Thread(target=self._open, args=(state, opened), name=f"radt-open-{name}", daemon=True)
                   for name, state in self.states.items()]
        for thread in openers:
            thread.start()
        live: list[ListenerState] = []
        try:
            self._sample_loop(opened, len(openers), live)
        finally:
            deadline = time.monotonic() + OPEN_GRACE_S
            for thread in openers:  # one still opening at stop: closed once it is open
                thread.join(max(0.0, deadline - time.monotonic()))
            live += self._take_opened(opened)
            self._finish_all(live)

    def _open(self, state: ListenerState, opened: queue.SimpleQueue) -> None:
        try:
            state.listener.open()
        except Exception as exc:
            self._fail(state, "open", exc)
            state.gave_up = True
            self._close(state)  # release what it opened before failing (an NVML init, a tool process)
            opened.put(None)
        else:
            opened.put(state)
        finally:
            self._wake.ring()

    @staticmethod
    def _take_opened(opened: queue.SimpleQueue) -> list[ListenerState]:
        out = []
        while True:
            try:
                state = opened.get_nowait()
            except queue.Empty:
                return out
            if state is not None:
                out.append(state)

    def _sample_loop(self, opened: queue.SimpleQueue, opening: int, live: list[ListenerState]) -> None:
        heap: list[tuple[float, int, ListenerState]] = []  # (due, order, state)
        while not self._stop.is_set():
            while opening:
                try:
                    state = opened.get_nowait()
                except queue.Empty:
                    break
                opening -= 1
                if state is not None:
                    state.start = time.monotonic()
                    live.append(state)
                    heapq.heappush(heap, (state.start, len(live), state))
            if not heap and not opening:
                return
            wait = heap[0][0] - time.monotonic() if heap else None
            if wait is None or wait > 0:
                self._wake.wait(wait)
                continue
            _, order, state = heapq.heappop(heap)
            if self._sample_once(state):
                state.failures = 0
            else:
                state.failures += 1
                if state.failures >= MAX_FAILURES:
                    state.gave_up = True
                    self._close(state)
                    continue
            # absolute schedule: no drift; ticks missed while a sample was slow are skipped
            interval = state.listener.interval
            state.tick = max(state.tick + 1, int((time.monotonic() - state.start) / interval) + 1)
            heapq.heappush(heap, (state.start + state.tick * interval, order, state))

    def _finish_all(self, live: list[ListenerState]) -> None:
        """Each listener's last readings side by side, then its close: the run's end waits for the slowest
        (a tool's process to exit, an NVML shutdown), not for their sum; with `defer_close` the closes go on
        in the background (`wait_closed`), beside what the run writes next."""
        self._side_by_side(self._last_readings, live, "last")
        self._closers = self._side_by_side(self._close, live, "close", wait=not self.defer_close)

    @staticmethod
    def _side_by_side(fn, live: list[ListenerState], what: str, wait: bool = True) -> list[threading.Thread]:
        """fn(state) for each listener, each in a thread of its own; joined unless `wait` is False."""
        threads = [threading.Thread(target=fn, args=(state,), name=f"radt-{what}-{state.listener.name}", daemon=True)
                   for state in live]
        for thread in threads:
            thread.start()
        for thread in threads if wait else ():
            thread.join()
        return threads

    def wait_closed(self, timeout: float = 10.0) -> None:
        """After stop(defer_close=True): the listeners' closes, waited for at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        for thread in self._closers:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _last_readings(self, state: ListenerState) -> None:
        """One last reading so counters (energy) cover the whole run, then the closing reading."""
        if not state.gave_up:
            gap = min(self.final_gap, state.listener.interval / 2)
            if time.monotonic() - state.last_sample_at >= gap:
                self._sample_once(state)
            self._sample_once(state, closing=True)

    def _close(self, state: ListenerState) -> None:
        if state.closed:
            return
        state.closed = True
        try:
            state.listener.close()
        except Exception as exc:
            log.debug("closing %s: %s", state.listener.name, exc)

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
