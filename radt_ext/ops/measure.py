"""Time and energy of a callable over one measurement window.

A window repeats the call until it lasts at least `min_window_s` (long enough for the GPU's
energy counter to resolve it; chunks are added when calibration guessed short), split into
timed chunks of equal size (at least `chunks`): time per call is the median
chunk time divided by its calls (CUDA events on a GPU, the wall clock on the CPU); energy per
call is the counter's difference over the whole window divided by every call in it.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Protocol

import torch


class Meter(Protocol):
    def read_j(self) -> float: ...


@dataclass
class Window:
    time_ms: float  # median time per call
    energy_mj: float  # energy per call (nan without a meter)
    power_w: float  # mean power over the window (nan without a meter)
    reps: int  # calls in the window
    window_s: float  # wall-clock length of the window


class Clock:
    """Synchronise and time chunks on one device: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def chunk_ms(self, fn: Callable[[], object], calls: int) -> Callable[[], float]:
        """Run `calls` calls now; the returned function gives their time (after a sync)."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            return lambda: start.elapsed_time(end)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        ms = (time.perf_counter() - t0) * 1e3
        return lambda: ms


def measure(fn: Callable[[], object], clock: Clock, meter: Meter | None, min_window_s: float,
            warmup: int = 2, chunks: int = 5) -> Window:
    for _ in range(warmup):
        fn()
    clock.sync()
    # calibrate: double the calls until a synchronised batch takes 5 % of the window
    calls, spent = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        clock.sync()
        spent = time.perf_counter() - t0
        if spent >= 0.05 * min_window_s or calls >= 1 << 16:
            break
        calls *= 2
    per_call_s = max(spent / calls, 1e-7)
    per_chunk = max(1, math.ceil(min_window_s / per_call_s / chunks))
    clock.sync()
    e0 = meter.read_j() if meter else math.nan
    t0 = time.perf_counter()
    pending = [clock.chunk_ms(fn, per_chunk) for _ in range(chunks)]
    clock.sync()
    wall = time.perf_counter() - t0
    while wall < min_window_s and len(pending) < 200 * chunks:
        # calibration over-estimated a call (a slow first batch): add chunks for what is missing
        rate = wall / (len(pending) * per_chunk)
        more = max(1, math.ceil((min_window_s - wall) / max(rate, 1e-9) / per_chunk))
        pending += [clock.chunk_ms(fn, per_chunk) for _ in range(more)]
        clock.sync()
        wall = time.perf_counter() - t0
    e1 = meter.read_j() if meter else math.nan
    reps = per_chunk * len(pending)
    time_ms = statistics.median(p() for p in pending) / per_chunk
    energy_j = e1 - e0
    return Window(time_ms=time_ms, energy_mj=energy_j * 1e3 / reps, power_w=energy_j / wall if wall > 0 else math.nan,
                  reps=reps, window_s=wall)
