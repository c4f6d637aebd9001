"""The whole network's time and energy per phase, measured in rounds spread over a profile.

A small eager network is bound by how fast the host launches its kernels, so one window of it
reads whatever the host was doing then. The network is instead measured in several rounds (each
its own window) taken before, between and after the operations' windows; the time per call is the
median over rounds, the power the rounds' energy over their metered span, and `spread` (largest
minus smallest round, over the median) records how far the rounds disagreed.
"""
from __future__ import annotations

import math
import statistics
from typing import Callable

import torch

from radt_ext.ops.capture import tensors
from radt_ext.ops.measure import METERING, Clock, Meter, Metering, Window, measure

ROUNDS = 3
WARMUP_STEPS = 3  # whole steps first: lazy kernel loading, allocator, library handles


def _backward(model, inputs) -> Callable[[], object]:
    outs = [t for t in tensors(model(*inputs)) if t.requires_grad]
    wrt = [p for p in model.parameters() if p.requires_grad]
    grads = [torch.randn_like(t) for t in outs]
    return lambda: torch.autograd.grad(outs, wrt, grads, retain_graph=True, allow_unused=True)


class NetworkRounds:
    """Windows of the whole network (forward, and backward in training), one round at a time."""

    def __init__(self, model, inputs: tuple, mode: str, clock: Clock, meter: Meter | None, window_s: float,
                 metering: Metering = METERING):
        self.model, self.inputs, self.training = model, inputs, mode == "training"
        self.clock, self.meter, self.window_s, self.metering = clock, meter, window_s, metering
        self.windows: dict[str, list[Window]] = {}
        with torch.set_grad_enabled(self.training):
            for _ in range(WARMUP_STEPS):
                out = model(*inputs)
                if self.training:
                    torch.autograd.grad([t for t in tensors(out) if t.requires_grad],
                                        [p for p in model.parameters() if p.requires_grad], allow_unused=True,
                                        grad_outputs=[torch.ones_like(t) for t in tensors(out) if t.requires_grad])
                del out
        clock.sync()

    def round(self) -> None:
        fwd = (lambda: self.model(*self.inputs))
        with torch.set_grad_enabled(self.training):
            self._add("forward" if self.training else "inference", self._measure(fwd))
        if self.training:
            with torch.enable_grad():
                bwd = _backward(self.model, self.inputs)
                self._add("backward", self._measure(bwd))
                del bwd

    def _measure(self, fn) -> Window:
        return measure(fn, self.clock, self.meter, self.window_s, metering=self.metering)

    def _add(self, phase: str, w: Window) -> None:
        self.windows.setdefault(phase, []).append(w)

    def rows(self) -> list[dict]:
        base = {"order": -1, "op": "network", "name": "", "count": 1, "input_shapes": ";".join(
            "x".join(map(str, t.shape)) for t in self.inputs), "params": "", "flops": math.nan, "bytes": math.nan}
        return [{**base, "phase": phase, **combined(ws)} for phase, ws in self.windows.items()]


def combined(ws: list[Window]) -> dict:
    """One row's values from several windows of the same call: median time, span-weighted power."""
    times = [w.time_ms for w in ws]
    time_ms = statistics.median(times)
    span = sum(w.window_s for w in ws)
    power = sum(w.power_w * w.window_s for w in ws) / span if span > 0 else math.nan
    busy = [w.busy for w in ws if not math.isnan(w.busy)]
    seen = [w for w in ws if not math.isnan(w.timeline_w)]
    seen_s = sum(w.window_s for w in seen)
    return {"time_ms": time_ms, "energy_mj": power * time_ms, "power_w": power, "reps": sum(w.reps for w in ws),
            "window_s": span, "spread": (max(times) - min(times)) / time_ms if time_ms > 0 else math.nan,
            "busy": min(busy) if busy else math.nan,
            "timeline_w": sum(w.timeline_w * w.window_s for w in seen) / seen_s if seen_s > 0 else math.nan}
