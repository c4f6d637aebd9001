"""Time and energy of a callable over one measurement window.

A window repeats the call, in timed chunks of equal size, for at least `min_window_s`: time per
call is the median chunk time divided by its calls (CUDA events on a GPU, the wall clock on the
CPU). With an energy meter the window runs from one update of the energy counter to a later one
(see `_metered`); energy per call is the mean power over that span times the time per call.
"""
from __future__ import annotations

import math
import statistics
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Callable, Protocol

import torch

from radt_ext.ops import host


# A counter that updates every 100 ms is seen to update 99.x or 100.x ms apart (polling jitter): a
# window of one update period counts as 0.1 s instead of waiting a second period half the time.
TICK_SLACK = 0.95
# between reads on the reading thread, so a meter that reads in microseconds (a replay) leaves the GIL
READ_PAUSE_S = 0.0002
# the host time to issue one call is measured over batches of about this much work, started on an idle device
ISSUE_S = 0.001


class Meter(Protocol):
    def read_j(self) -> float: ...


@dataclass(frozen=True)
class Metering:
    """How a metered window keeps the device busy and reads the energy counter."""
    chunk_s: float = 0.01  # work per chunk
    queued_s: float = 0.03  # work kept queued ahead (at least two chunks)
    settle_s: float = 0.02  # counter updates this soon after the window starts are not used
    threaded: bool = True  # read the counter on a thread of its own, not between launches
    whole_periods: bool = True  # span = update periods counted x the median period, not the polled times
    # once the counter's update period is known: no reads for this share of it after an update (each read is
    # milliseconds of driver CPU beside the launching thread); 0 reads all the time
    quiet_share: float = 0.8


METERING = Metering()
# The profiler's metering until 2026-11-25: the counter read (4-5 ms of driver CPU on an H100) on the
# launching thread between 4 ms chunks, two in flight, left the GPU idle part of each window.
POLLED = Metering(chunk_s=0.004, queued_s=0.0, settle_s=0.01, threaded=False, whole_periods=False, quiet_share=0.0)


@dataclass
class Window:
    time_ms: float  # median time per call
    energy_mj: float  # energy per call (nan without a meter)
    power_w: float  # mean power over the window (nan without a meter)
    reps: int  # calls in the window
    window_s: float  # length of the metered span (wall clock without a meter)
    busy: float = math.nan  # share of the window's device timeline that its chunks covered
    timeline_w: float = math.nan  # mean of the driver's power samples over the metered span (a check on power_w)
    during: dict | None = None  # the device's state (clocks, temperature, ...) read once inside the window
    host_ms: float = math.nan  # host time to issue one call on an idle device (see `issue_ms`)
    time_fast_ms: float = math.nan  # the 10th percentile of the chunks' time per call
    meter_reads: int = 0  # counter reads during the window


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
            self.t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            self.t1 = time.perf_counter()
            self._ms = (self.t1 - self.t0) * 1e3
            self._end = None

    def done(self) -> bool:
        return self._end is None or self._end.query()

    def ms(self) -> float:
        return self._ms if self._end is None else self._start.elapsed_time(self._end)


def busy_share(chunks: list[Chunk]) -> float:
    """Share of the time from the first chunk's start to the last one's end that chunks ran."""
    if not chunks:
        return math.nan
    first, last = chunks[0], chunks[-1]
    span = (last.t1 - first.t0) * 1e3 if first._end is None else first._start.elapsed_time(last._end)
    return min(1.0, sum(c.ms() for c in chunks) / span) if span > 0 else math.nan


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
            warmup: int = 2, chunks: int = 5, metering: Metering = METERING,
            probe: Callable[[], dict] | None = None) -> Window:
    """`probe`, with a meter: read once on the reading thread inside the window (the device's state). Python's
    garbage collector is held off throughout (`host.quiet`)."""
    with host.quiet():
        per_call_s = _calibrate(fn, clock, min_window_s, warmup)
        issued = issue_ms(fn, clock, per_call_s)
        if meter is not None:
            w = _metered(fn, clock, meter, per_call_s, min_window_s, metering, probe)
        else:
            w = _timed(fn, clock, per_call_s, min_window_s, chunks)
    w.host_ms = issued
    return w


def issue_ms(fn: Callable[[], object], clock: Clock, per_call_s: float) -> float:
    """Milliseconds the host takes to issue one call: calls issued back to back on an idle device (about
    `ISSUE_S` of work, so the launch queue never fills and makes the host wait), the wall clock from the first
    to the last return, per call; the median of a few such batches. On the CPU this is the call itself."""
    n = max(1, min(64, round(ISSUE_S / max(per_call_s, 1e-9))))
    per = []
    for _ in range(5 if per_call_s < 0.01 else 3):
        clock.sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n)
    clock.sync()
    return statistics.median(per) * 1e3


def _fast_ms(chunks: list[Chunk]) -> float:
    per = sorted(c.ms() / c.calls for c in chunks)
    return per[int(0.1 * (len(per) - 1))] if per else math.nan


def _timed(fn, clock: Clock, per_call_s: float, min_window_s: float, chunks: int) -> Window:
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
                  power_w=math.nan, reps=per_chunk * len(done), window_s=wall, busy=busy_share(done),
                  time_fast_ms=_fast_ms(done))


class Feeder:
    """Chunks of equal size kept `metering.queued_s` of work (at least two chunks) ahead on the device."""

    def __init__(self, fn: Callable[[], object], clock: Clock, per_call_s: float, metering: Metering = METERING):
        self.fn, self.clock = fn, clock
        self.calls = max(1, math.ceil(metering.chunk_s / per_call_s))
        self.depth = max(2, math.ceil(metering.queued_s / (self.calls * per_call_s)))
        self.inflight: deque[Chunk] = deque()
        self.finished: list[Chunk] = []

    def step(self, wait: bool = True) -> bool:
        """Top the queue up; True when its oldest chunk had finished (and moved to `finished`). With
        `wait`, a queue still busy sleeps a moment, so a reading thread records its time promptly."""
        while len(self.inflight) < self.depth:
            self.inflight.append(self.clock.chunk(self.fn, self.calls))
        if self.inflight[0].done():
            self.finished.append(self.inflight.popleft())
            return True
        if wait:
            time.sleep(0.0005)
        return False


class Ticks:
    """The energy counter's updates seen during one window, as (time seen, joules)."""

    def __init__(self, meter: Meter, settle_s: float, threaded: bool, probe: Callable[[], dict] | None = None,
                 quiet_s: float = 0.0):
        self.meter, self.settle_s, self.probe, self.quiet_s = meter, settle_s, probe, quiet_s
        self.changed_at: float | None = None  # when the last update was seen
        self.during: dict | None = None
        self.seen: list[tuple[float, float]] = []
        self.reads, self.read_s = 0, 0.0
        self.t0 = time.perf_counter()
        self.first = self.last = self._read()
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="energy-ticks", daemon=True) if threaded else None
        if self._thread is not None:
            self._thread.start()

    def _read(self) -> float:
        t = time.perf_counter()
        value = self.meter.read_j()
        self.reads += 1
        self.read_s += time.perf_counter() - t
        return value

    def poll(self) -> None:
        value = self._read()
        if value != self.last:
            now = time.perf_counter()
            self.changed_at = now
            if now - self.t0 >= self.settle_s:  # an update right at the start may still count what ran before
                self.seen.append((now, value))
                if self.probe is not None and self.during is None:
                    self.during = self.probe()  # once, well inside the window
            self.last = value

    def _pause_s(self) -> float:
        """Until the next read: `quiet_s` after the last update seen (the counter will not move before the
        next period), else a moment."""
        if self.quiet_s > 0 and self.changed_at is not None:
            return max(READ_PAUSE_S, self.changed_at + self.quiet_s - time.perf_counter())
        return READ_PAUSE_S

    def _loop(self) -> None:
        host.pin_meter_thread()
        try:
            while not self._stop.wait(self._pause_s()):
                self.poll()
        except BaseException as exc:  # raised on the launching thread by stop()
            self._error = exc

    def failed(self) -> bool:
        return self._error is not None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error


# Gaps between consecutive counter updates seen so far, per meter: the update period is their median.
_gaps: "weakref.WeakKeyDictionary[object, deque]" = weakref.WeakKeyDictionary()


def whole_periods_s(times: list[float], known_gaps, read_s: float) -> float:
    """Seconds from the first to the last of `times` (updates seen), counted in whole update periods
    (the median of `known_gaps`) where that is safe: seen times are late by up to one read (4-5 ms on
    an H100, 5 % of a 0.1 s window), while a counter that updates on a fixed period is exact in periods."""
    gaps = [b - a for a, b in zip(times, times[1:])]
    if len(known_gaps) < 5:
        return times[-1] - times[0]
    period = statistics.median(known_gaps)
    if period < 10 * read_s:  # a counter updating about as fast as it is read: counting periods may miss some
        return times[-1] - times[0]
    return period * sum(max(1, round(g / period)) for g in gaps)


def update_period_s(meter: Meter) -> float | None:
    """The counter's update period as seen so far (the median gap between updates), None before five gaps."""
    try:
        known = _gaps.get(meter)
    except TypeError:
        return None
    return statistics.median(known) if known is not None and len(known) >= 5 else None


def _span_s(meter: Meter, ticks: Ticks, whole_periods: bool) -> float:
    times = [t for t, _ in ticks.seen]
    if not whole_periods:
        return times[-1] - times[0]
    try:
        known = _gaps.setdefault(meter, deque(maxlen=500))
    except TypeError:  # a meter that takes no weak reference: this window's gaps only
        known = deque()
    known.extend(b - a for a, b in zip(times, times[1:]))
    return whole_periods_s(times, known, ticks.read_s / max(1, ticks.reads))


def _metered(fn, clock: Clock, meter: Meter, per_call_s: float, min_window_s: float,
             metering: Metering = METERING, probe: Callable[[], dict] | None = None) -> Window:
    """Keep the device busy with chunks queued `metering.queued_s` ahead while the energy counter is
    read (on a thread of its own: the read costs milliseconds of driver CPU, during which launches go
    on); the power is the counter's rise between two of its updates at least `min_window_s` apart,
    divided by the time between them. A counter that updates only every ~100 ms (Hopper) is read
    between its own updates, so no partial period biases the result; energy per call = power x time."""
    feeder = Feeder(fn, clock, per_call_s, metering)
    period = update_period_s(meter)
    quiet_s = metering.quiet_share * period if period and metering.threaded else 0.0
    ticks = Ticks(meter, metering.settle_s, metering.threaded, probe, quiet_s)
    deadline = ticks.t0 + max(1.5, 15 * min_window_s)
    fallback = False
    try:
        while True:
            if not metering.threaded:
                ticks.poll()
            if feeder.step(wait=metering.threaded):
                seen = ticks.seen
                if len(seen) >= 2 and seen[-1][0] - seen[0][0] >= TICK_SLACK * min_window_s:
                    break
                if time.perf_counter() > deadline or ticks.failed():
                    fallback = True  # a counter that hardly moves: use what it did
                    break
    finally:
        try:
            ticks.stop()
        finally:
            clock.sync()
    finished = feeder.finished + list(feeder.inflight)
    time_ms = statistics.median(c.ms() for c in finished) / feeder.calls
    timeline = math.nan
    if fallback:
        span = time.perf_counter() - ticks.t0
        power = (ticks.last - ticks.first) / span
    else:
        span = _span_s(meter, ticks, metering.whole_periods)
        power = (ticks.seen[-1][1] - ticks.seen[0][1]) / span if span > 0 else math.nan
        if hasattr(meter, "timeline_w"):
            epoch = time.time() - time.perf_counter()
            timeline = meter.timeline_w(epoch + ticks.seen[0][0], epoch + ticks.seen[-1][0])
    return Window(time_ms=time_ms, energy_mj=power * time_ms, power_w=power, reps=feeder.calls * len(finished),
                  window_s=span, busy=busy_share(finished), timeline_w=timeline, during=ticks.during,
                  time_fast_ms=_fast_ms(finished), meter_reads=ticks.reads)
