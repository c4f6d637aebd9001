"""One GPU's cumulative energy at about four points a second, from a counter read every few seconds.

The energy counter is exact but costs ~5 ms of CPU a read, so it is read rarely (open, close, every
30 s). The driver's power samples (~50 a second, drained about once a second) are cheap but are a
sampled sensor. Between two counter reads the timeline is the trapezoid integral of the power
samples, rescaled so that it rises by exactly what the counter rose: each point since the previous
read is `E_prev + I(t) x (E_read - E_prev) / I(read)`, where I(t) is the integral since that read.

Why rescale and not offset: the gap between the two sources is a gain (the sensor's samples against
the hardware integrator, about 1 %), so spreading it in proportion to the power keeps the course's
shape, meets the counter at both reads and stays monotone (power is never negative). An offset would
put the whole gap into a step at the read, downwards when the samples over-read.

A segment's points come out when its closing read is taken: up to one counter period after their
own time, each at its own time. Without power samples a segment is the counter's point alone (the
chart draws a straight line between reads), as it was.
"""
from __future__ import annotations

POINT_EVERY_S = 0.25  # at most this far apart in a segment with power samples: 4 points a second
# A step in power (a kernel starting or ending) gets a point on either side, at most this close to the
# previous point: a span's end interpolated between points then misses no step's energy.
STEP = 0.2  # a change of more than this share of the larger sample and more than STEP_MIN_W
STEP_MIN_W = 20.0
STEP_GAP_S = 0.04

Points = list[tuple[float, float]]


class EnergyTimeline:
    def __init__(self, t0: float, joules: float = 0.0, every_s: float = POINT_EVERY_S):
        self.every_s = every_s
        self._t, self._e = t0, joules  # the last counter read: time (epoch s) and J
        self._edge: tuple[float, float] | None = None  # the newest power sample at or before it
        self._samples: Points = []  # power samples (epoch s, W) not yet closed by a read, in order

    def power(self, samples: Points) -> None:
        """New power samples, oldest first (a drain); those older than the last read only carry
        the power across it."""
        for t, w in samples:
            if t > self._t:
                self._samples.append((t, w))
            elif self._edge is None or t >= self._edge[0]:
                self._edge = (t, w)

    def counter(self, t: float, joules: float) -> Points:
        """A counter read at time t (J on the same scale as at open): the segment's points, ending at it."""
        if t <= self._t:
            return []
        inside, later = self._split(t)
        points = self._segment(t, joules, inside, later)
        if inside:
            self._edge = inside[-1]
        self._t, self._e, self._samples = t, joules, later
        return points

    def _split(self, t: float) -> tuple[Points, Points]:
        samples = self._samples
        k = len(samples)
        while k and samples[k - 1][0] > t:
            k -= 1
        return samples[:k], samples[k:]

    def _segment(self, t: float, joules: float, inside: Points, later: Points) -> Points:
        rise = joules - self._e
        if not inside or rise < 0:  # no power samples, or a counter that went back (reset): the read alone
            return [(t, joules)]
        a = self._t
        first = inside[0]
        start_w = first[1] if self._edge is None else _at(self._edge, first, a)
        end_w = _at(inside[-1], later[0], t) if later else inside[-1][1]
        # trapezoid from the read at a, through every sample, to the read at t
        cum, marks = 0.0, []
        prev_t, prev_w, last_mark = a, start_w, a
        for ts, w in inside:
            step = abs(w - prev_w) > max(STEP * max(w, prev_w), STEP_MIN_W)
            if step and prev_t - last_mark >= STEP_GAP_S and t - prev_t >= STEP_GAP_S:
                marks.append((prev_t, cum))  # the last sample before the step
                last_mark = prev_t
            cum += (ts - prev_t) * (w + prev_w) / 2.0
            prev_t, prev_w = ts, w
            gap = STEP_GAP_S if step else self.every_s
            if ts - last_mark >= gap and t - ts >= STEP_GAP_S:
                marks.append((ts, cum))
                last_mark = ts
        total = cum + (t - prev_t) * (end_w + prev_w) / 2.0
        if total <= 0:
            return [(t, joules)]
        scale = rise / total
        return [(ts, self._e + c * scale) for ts, c in marks] + [(t, joules)]


def _at(p0: tuple[float, float], p1: tuple[float, float], t: float) -> float:
    """Power at t on the line between two samples (the nearer one's value outside them)."""
    (t0, w0), (t1, w1) = p0, p1
    if t1 <= t0 or t <= t0:
        return w0
    if t >= t1:
        return w1
    return w0 + (w1 - w0) * (t - t0) / (t1 - t0)
