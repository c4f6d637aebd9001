"""Time and energy of a callable over one measurement window.

A window repeats the call, in timed chunks of equal size, for at least `min_window_s`: time per
call is the median chunk time divided by its calls (CUDA events on a GPU, the wall clock on the
CPU). With an energy meter the window runs from one update of the energy counter to a later one
(see `_metered`); energy per call is the mean power over that span times the time per call.
"""
from __future__ import annotations

import math
import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Protocol

import torch


# A counter that updates every 100 ms is seen to update 99.x or 100.x ms apart (polling jitter): a
# window of one update period counts as 0.1 s instead of waiting a second period half the time.
TICK_SLACK = 0.95


class Meter(Protocol):
    def read_j(self) -> float: ...


@dataclass
class Window:
    time_ms: float  # median time per call
    energy_mj: float  # energy per call (nan without a meter)
    power_w: float  # mean power over the window (nan without a meter)
    reps: int  # calls in the window
    window_s: float  # wall-clock length of the window


class Chunk:
    """Calls already run (CPU) or enqueued (GPU) between two timing marks."""

    def __init__(self, clock: "Clock", fn: Callable[[], object], calls: int):
        self.calls = calls
        if clock.cuda:
            self._start, self._end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._start.record()
            for _ in range(calls):
                fn()
            self._end.record()
        else:
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            self._ms = (time.perf_counter() - t0) * 1e3
            self._end = None

    def done(self) -> bool:
        return self._end is None or self._end.query()

    def ms(self) -> float:
        return self._ms if self._end is None else self._start.elapsed_time(self._end)


class Clock:
    """Synchronise and time chunks on one device: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def chunk(self, fn: Callable[[], object], calls: int) -> Chunk:
        return Chunk(self, fn, calls)


def _calibrate(fn, clock: Clock, min_window_s: float, warmup: int) -> float:
    """Seconds per call: double the calls until a synchronised batch takes 5 % of the window."""
    for _ in range(warmup):
        fn()
    clock.sync()
    calls = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        clock.sync()
        spent = time.perf_counter() - t0
        if spent >= 0.05 * min_window_s or calls >= 1 << 16:
            return max(spent / calls, 1e-7)
        calls *= 2


def measure(fn: Callable[[], object], clock: Clock, meter: Meter | None, min_window_s: float,
            warmup: int = 2, chunks: int = 5) -> Window:
    per_call_s = _calibrate(fn, clock, min_window_s, warmup)
    if meter is not None:
        return _metered(fn, clock, meter, per_call_s, min_window_s)
    per_chunk = max(1, math.ceil(min_window_s / per_call_s / chunks))
    t0 = time.perf_counter()
    done = [clock.chunk(fn, per_chunk) for _ in range(chunks)]
    clock.sync()
    wall = time.perf_counter() - t0
    while wall < min_window_s and len(done) < 200 * chunks:
        # calibration over-estimated a call (a slow first batch): add chunks for what is missing
        rate = wall / (len(done) * per_chunk)
        more = max(1, math.ceil((min_window_s - wall) / max(rate, 1e-9) / per_chunk))
        done += [clock.chunk(fn, per_chunk) for _ in range(more)]
        clock.sync()
        wall = time.perf_counter() - t0
    return Window(time_ms=statistics.median(c.ms() for c in done) / per_chunk, energy_mj=math.nan,
                  power_w=math.nan, reps=per_chunk * len(done), window_s=wall)


def _metered(fn, clock: Clock, meter: Meter, per_call_s: float, min_window_s: float,
             chunk_s: float = 0.004, settle_s: float = 0.01) -> Window:
    """Keep the device busy with short chunks (two in flight) while polling the energy counter; the
    power is the counter's rise between two of its updates at least `min_window_s` apart, divided
    by the time between them. A counter that updates only every ~100 ms (Hopper) is read between
    its own updates, so no partial period biases the result; energy per call = power x time."""
    calls = max(1, math.ceil(chunk_s / per_call_s))
    inflight = deque([clock.chunk(fn, calls), clock.chunk(fn, calls)])
    finished: list[Chunk] = []
    t_start = time.perf_counter()
    last = first = meter.read_j()
    ticks: list[tuple[float, float]] = []
    deadline = t_start + max(1.5, 15 * min_window_s)

    def poll():
        nonlocal last
        value = meter.read_j()
        if value != last:
            now = time.perf_counter()
            if now - t_start >= settle_s:  # an update right at the start may still count what ran before
                ticks.append((now, value))
            last = value

    while True:
        head = inflight[0]
        while not head.done():
            poll()
        finished.append(inflight.popleft())
        poll()
        if len(ticks) >= 2 and ticks[-1][0] - ticks[0][0] >= TICK_SLACK * min_window_s:
            break
        if time.perf_counter() > deadline:  # a counter that hardly moves: use what it did
            ticks = [(t_start, first), (time.perf_counter(), last)]
            break
        inflight.append(clock.chunk(fn, calls))
    clock.sync()
    finished += inflight
    time_ms = statistics.median(c.ms() for c in finished) / calls
    (ta, ea), (tb, eb) = ticks[0], ticks[-1]
    power = (eb - ea) / (tb - ta) if tb > ta else math.nan
    return Window(time_ms=time_ms, energy_mj=power * time_ms, power_w=power, reps=calls * len(finished),
                  window_s=tb - ta)
