"""The whole network's time and energy per phase, measured in rounds spread over a profile.

A small eager network is bound by how fast the host launches its kernels, so one window of it
reads whatever the host was doing then. The network is instead measured in several rounds (each
its own window) taken before, between and after the operations' windows. The time per call is that of the
fastest tenth of all the rounds' chunks (`pace_ms`): a slower round, or a slower stretch of one, is the GPU
waiting on the host (in the held-out suite, rounds up to 2.3x slower at full SM clock, no throttle reason and
lower power). The energy per call is the median of the rounds that ran within `NEAR` of the fastest round's
time (rounds at the same pace; one round's power alone moved by up to 20 % on an H200). `spread` (largest minus smallest round, over the median) records how far the rounds
disagreed in time and `energy_spread` in energy, and a prediction carries them as an interval. `host_ms` is
the host's time to issue one step on an idle device (the fastest round's host pace), the part of a step a
slower host would lengthen.

Each round is also kept on its own (`details`) with the device's state just before its window and once
inside it (SM and memory clocks, performance state, temperature, power, throttle reasons), where the meter
can say, and the host's: the dispatch pace just before the window (`before_dispatch_us`), and over the
window the launching thread's share of CPU time, its context switches (`host_preempted`: taken off its
CPU by other work) and the CPU it ran on, and the meter's reads.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

from radt_ext.ops import host
from radt_ext.ops.capture import tensors
from radt_ext.ops.measure import METERING, Clock, Meter, Metering, Window, measure

ROUNDS = 5
WARMUP_STEPS = 3  # whole steps first: lazy kernel loading, allocator, library handles
NEAR = 0.03  # rounds this close to the fastest one's time ran at its pace: their median energy is the network's


def _backward(model, inputs, kwargs) -> Callable[[], object]:
    outs = [t for t in tensors(model(*inputs, **kwargs)) if t.requires_grad]
    wrt = [p for p in model.parameters() if p.requires_grad]
    grads = [torch.randn_like(t) for t in outs]
    return lambda: torch.autograd.grad(outs, wrt, grads, retain_graph=True, allow_unused=True)


class NetworkRounds:
    """Windows of the whole network (forward, and backward in training), one round at a time."""

    def __init__(self, model, inputs: tuple, mode: str, clock: Clock, meter: Meter | None, window_s: float,
                 metering: Metering = METERING, kwargs: dict | None = None):
        self.model, self.inputs, self.kwargs, self.training = model, inputs, kwargs or {}, mode == "training"
        self.clock, self.meter, self.window_s, self.metering = clock, meter, window_s, metering
        self.windows: dict[str, list[Window]] = {}
        self.details: list[dict] = []
        self._state = getattr(meter, "state", None)  # the device's clocks, temperature, ... (a GPU's meter)
        started = time.perf_counter()
        with torch.set_grad_enabled(self.training):
            for _ in range(WARMUP_STEPS):
                out = model(*inputs, **self.kwargs)
                if self.training:
                    torch.autograd.grad([t for t in tensors(out) if t.requires_grad],
                                        [p for p in model.parameters() if p.requires_grad], allow_unused=True,
                                        grad_outputs=[torch.ones_like(t) for t in tensors(out) if t.requires_grad])
                del out
        clock.sync()
        self.warmup_s = time.perf_counter() - started

    def round(self) -> None:
        fwd = (lambda: self.model(*self.inputs, **self.kwargs))
        with torch.set_grad_enabled(self.training):
            self._measure("forward" if self.training else "inference", fwd)
        if self.training:
            with torch.enable_grad():
                bwd = _backward(self.model, self.inputs, self.kwargs)
                self._measure("backward", bwd)
                del bwd

    def _measure(self, phase: str, fn) -> None:
        before = self._state() if self._state else None
        pace = host.pace_us(self.clock.device)
        thread = host.thread_state()
        w = measure(fn, self.clock, self.meter, self.window_s, metering=self.metering, probe=self._state)
        moved = host.thread_change(thread, host.thread_state())
        self.windows.setdefault(phase, []).append(w)
        detail = {"phase": phase, "round": len(self.windows[phase]) - 1, "time_ms": w.time_ms,
                  "energy_mj": w.energy_mj, "power_w": w.power_w, "reps": w.reps, "window_s": w.window_s,
                  "busy": w.busy, "host_ms": w.host_ms, "time_fast_ms": w.time_fast_ms,
                  "meter_reads": w.meter_reads, "before_dispatch_us": pace, **moved}
        for when, state in (("before", before), ("during", w.during)):
            detail.update({f"{when}_{k}": v for k, v in (state or {}).items()})
        self.details.append(detail)

    def rows(self) -> list[dict]:
        shapes = [*("x".join(map(str, t.shape)) for t in self.inputs),
                  *(f"{k}={'x'.join(map(str, t.shape))}" for k, t in self.kwargs.items())]
        base = {"order": -1, "op": "network", "name": "", "count": 1, "input_shapes": ";".join(shapes),
                "params": "", "flops": math.nan, "bytes": math.nan}
        return [{**base, "phase": phase, **combined(ws)} for phase, ws in self.windows.items()]


def combined(ws: list[Window]) -> dict:
    """One row's values from several windows of the same call: the time per call of the fastest tenth of
    their chunks (`pace_ms`), the median energy and power of the windows within `NEAR` of the fastest
    window's time (`at_pace`); `spread` (largest - smallest window time) / median over all of them, and
    `energy_spread` the same of their energy per call (a round's power moves with the GPU's state even where
    its time does not); `host_ms` the fastest host pace."""
    times = [w.time_ms for w in ws]
    energies = [w.energy_mj for w in ws if not math.isnan(w.energy_mj)]
    time_ms = pace_ms(ws)
    energy = at_pace(times, [w.energy_mj for w in ws])
    power = at_pace(times, [w.power_w for w in ws])
    hosts = [w.host_ms for w in ws if not math.isnan(w.host_ms)]
    span = sum(w.window_s for w in ws)
    busy = [w.busy for w in ws if not math.isnan(w.busy)]
    seen = [w for w in ws if not math.isnan(w.timeline_w)]
    seen_s = sum(w.window_s for w in seen)
    return {"time_ms": time_ms, "energy_mj": energy, "power_w": power, "reps": sum(w.reps for w in ws),
            "window_s": span, "spread": _spread(times),
            "busy": min(busy) if busy else math.nan,
            "timeline_w": sum(w.timeline_w * w.window_s for w in seen) / seen_s if seen_s > 0 else math.nan,
            "energy_spread": _spread(energies), "host_ms": min(hosts) if hosts else math.nan}


def pace_ms(ws: list[Window]) -> float:
    """The step's time at the host's best pace: over all the windows' chunks, the fastest tenth's time per
    call (each window's 10th percentile, the smallest of them; a window's median where it kept no chunks).
    A chunk is about 10 ms of steps: where the host slows down for part of a window, the chunks it did not
    slow still say what the GPU and a steady host do."""
    return min(w.time_ms if math.isnan(w.time_fast_ms) else w.time_fast_ms for w in ws)


def at_pace(times: list[float], energies: list[float], near: float = NEAR) -> float:
    """Energy per call at the fastest round's pace: the median energy of the rounds whose time is within
    `near` of the fastest (NaN energies left out; the fastest round's own where it is the only one)."""
    fastest = min(times)
    close = [e for t, e in zip(times, energies) if t <= fastest * (1 + near) and not math.isnan(e)]
    return statistics.median(close) if close else math.nan


def _spread(values: list[float]) -> float:
    mid = statistics.median(values) if values else math.nan
    return (max(values) - min(values)) / mid if values and mid > 0 else math.nan
