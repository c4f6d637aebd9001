"""Energy over any span of time, from the cumulative `gpu{i}_energy_j` series of a session.

The `nvml` listener's `gpu{i}_energy_j` is the hardware counter (J since the listener opened) where it
was read, and between reads the driver's power samples integrated and rescaled to meet the counter
(listeners/energy_timeline.py). A span's energy is therefore the series' rise over the span,
interpolated at both ends: the counter difference where both ends were read, the integrated power in
between. `span_energy_j` is that one function; every run's summary (radt-ext's run, the runs the
script opens, a collocated workload's) takes its GPU energy from it.
"""
from __future__ import annotations

import bisect
import re
from array import array

ENERGY = re.compile(r"^gpu\d+_energy_j$")


def span_energy_j(times, values, start: float, end: float) -> tuple[float, float] | None:
    """(joules, seconds) the cumulative series rose over [start, end], clamped to where it was
    recorded (energy before the first read is unknown); None without a point."""
    if not len(times):
        return None
    a, b = max(start, times[0]), min(end, times[-1])
    if b <= a:
        return 0.0, 0.0
    return _at(times, values, b) - _at(times, values, a), b - a


def _at(times, values, t: float) -> float:
    i = bisect.bisect_left(times, t)
    if i < len(times) and times[i] == t:
        return values[i]
    t0, t1, v0, v1 = times[i - 1], times[i], values[i - 1], values[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


class EnergySeries:
    """Every `gpu{i}_energy_j` point of a session, 16 bytes a point (about two a second a GPU)."""

    def __init__(self):
        self._series: dict[str, tuple[array, array]] = {}

    def add(self, name: str, t: float, value: float) -> None:
        times, values = self._series.setdefault(name, (array("d"), array("d")))
        if times and t <= times[-1]:  # one value per time, in order: a repeat or a late point is left out
            return
        times.append(t)
        values.append(value)

    def covers(self, t: float) -> bool:
        """Every series has a point at or after t (its segment up to t is closed)."""
        return all(times[-1] >= t for times, _ in self._series.values())

    def span(self, name: str, start: float, end: float) -> tuple[float, float] | None:
        """(joules, seconds covered) of one series over [start, end]; None when it has no point."""
        times, values = self._series.get(name, ((), ()))
        return span_energy_j(times, values, start, end)

    def over(self, start: float, end: float) -> dict[str, tuple[float, float]]:
        """{metric name: (joules, seconds covered)} over [start, end]."""
        out = {}
        for name, (times, values) in self._series.items():
            got = span_energy_j(times, values, start, end)
            if got is not None:
                out[name] = got
        return out


def power_integral_j(points, start: float, end: float) -> float:
    """Joules of a power series [(t s, W), ...] over [start, end]: trapezoids, cut at both ends (the
    cross-check that a span's counter energy is held against)."""
    total = 0.0
    for (t0, w0), (t1, w1) in zip(points, points[1:]):
        lo, hi = max(start, t0), min(end, t1)
        if hi > lo:
            def at(t):
                return w0 + (w1 - w0) * (t - t0) / (t1 - t0)
            total += (hi - lo) * (at(lo) + at(hi)) / 2
    return total
