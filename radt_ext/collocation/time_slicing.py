"""Each workload's share of a time-sliced GPU, from NVML's per-process samples (one process a tick).

Pure functions: no NVML, no MLflow. Under time-slicing (no MPS, no MIG) the driver runs one context at a
time and hands the GPU round-robin to the contexts that have work, so workloads busy at the same time get
equal shares of its busy time. NVML's per-process utilization names one process per sampling tick
(~200 ms on an H100) with the whole GPU's SM % of that tick: with two busy workloads the names come in
runs (of 1–5 ticks on an H100), so counting them measures a share only to about ±12 points over a
10-s overlap. What the ticks do tell well is who was busy when; the split therefore follows the
scheduler, and the counts only check it:

1. **Busy spans.** A workload is busy from the tick before its first busy sample (SM ≥ 1 %) to its last
   one; a gap of up to max(MIN_GAP_S, GAP_TICKS ticks) between its busy samples (the other workloads'
   runs) does not end it.
2. **Edges.** A span edge can hide inside another workload's run of names. (a) Where the workload's own
   clock says when its work started and ended (its first and last progress marks, `window`), an edge up
   to EDGE ticks outside it (or less than a tick inside) moves to it. (b) Else, two workloads' spans
   whose starts and ends are both within EDGE ticks of each other are taken as one span (the ticks cannot
   order those edges; where both processes were alive then), and one edge within NEAR ticks of another
   workload's same edge moves to it. (c) Else an edge next to another workload's busy span moves out by
   RESIDUAL_TICKS (the part of that workload's run it hid in, on average).
3. **Shares.** While k workloads are busy each gets 1/k of the active energy. Per set of workloads busy
   together, the ticks that name each are counted: z = the largest departure of a workload's count from
   1/k in standard errors (the variance widened for runs of names: the larger of the lag-1 and the
   run-length dispersion). The weights move from 1/k towards the counted fractions by
   max(0, 1 − (Z_SHRINK / z)²): not at all while the counts agree with equal shares (|z| ≤ 3), most of the
   way when they clearly do not (a light workload beside a heavy one over a long overlap).
4. **Interval.** Each busy workload's share lies, as far as the ticks can tell, in the Wilson interval
   (Z_CI) of its counted fraction (widened the same way), joined with the weight used. The edges moved
   in step 2 add their energy to the interval's far side.
"""
from __future__ import annotations

import itertools

import math
from dataclasses import dataclass, field

BUSY_PCT = 1.0  # a sample at or above this SM % says its process had kernels running
GAP_TICKS = 10  # a workload's busy span goes on across a gap in its names of up to this many ticks
MIN_GAP_S = 2.0
EDGE_TICKS = 10  # edges closer than this (and EDGE_MAX_S) are ones the ticks cannot order
EDGE_MAX_S = 2.0
NEAR_TICKS = 2  # a single edge this close to another workload's same edge is the same time
RESIDUAL_TICKS = 1.0  # an edge next to another's busy span hides in its run by about this much
Z_SHRINK = 3.0  # counts further than this many standard errors from equal shares move the weights
Z_CI = 1.96  # the interval: 95 %


def wilson(successes: float, n: float, z: float = Z_CI) -> tuple[float, float]:
    """Wilson score interval of a proportion (successes and n may be effective, non-integer counts)."""
    if n <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, successes / n))
    d = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def dispersion(named: list[str]) -> float:
    """How much wider than binomial the count of one name is when names come in runs: the larger of
    (1+ρ)/(1−ρ) from the lag-1 agreement ρ and var/mean of the run lengths (≥ 1)."""
    n = len(named)
    if n < 3:
        return 1.0
    share = {x: named.count(x) / n for x in set(named)}
    expected = sum(v * v for v in share.values())
    same = sum(1 for a, b in zip(named, named[1:]) if a == b) / (n - 1)
    out = 1.0
    if expected < 1.0:
        rho = min(0.9, max(0.0, (same - expected) / (1.0 - expected)))
        out = (1.0 + rho) / (1.0 - rho)
    runs = [len(list(run)) for _, run in itertools.groupby(named)]
    if len(runs) > 2:
        mean = sum(runs) / len(runs)
        var = sum((r - mean) ** 2 for r in runs) / (len(runs) - 1)
        out = max(out, var / mean)
    return out


@dataclass
class Regime:
    """A set of workloads busy together, and what the ticks in it say."""
    names: frozenset
    named: list = field(default_factory=list)  # (time, name) of each busy tick inside it
    counts: dict = field(default_factory=dict)
    weights: dict = field(default_factory=dict)
    low: dict = field(default_factory=dict)
    high: dict = field(default_factory=dict)
    z: float = 0.0
    dispersion: float = 1.0

    def weigh(self) -> None:
        k = len(self.names)
        fair = 1.0 / k
        order = [n for _, n in sorted(self.named)]
        total = len(order)
        self.counts = {n: order.count(n) for n in self.names}
        frac = {n: self.counts[n] / total for n in self.names} if total else {n: fair for n in self.names}
        self.dispersion = dispersion(order)
        eff = total / self.dispersion
        lam = 0.0
        if eff > 0:
            se = math.sqrt(fair * (1 - fair) / eff)
            self.z = max(abs(frac[n] - fair) for n in self.names) / se
            lam = max(0.0, 1.0 - (Z_SHRINK / self.z) ** 2) if self.z > 0 else 0.0
        self.weights = {n: fair + lam * (frac[n] - fair) for n in self.names}
        for n in self.names:
            lo, hi = wilson(self.counts[n] / self.dispersion, eff) if total else (0.0, 1.0)
            self.low[n] = min(lo, self.weights[n])
            self.high[n] = max(hi, self.weights[n])


class TimeSlices:
    """Busy spans and shares of the workloads on one time-sliced GPU (see the module's docstring).

    workloads: (name, start, end or None, [(t, SM %)] samples, each describing the tick before t);
    windows: {name: (first, last) time of its own progress marks}, where it has them."""

    def __init__(self, workloads: list[tuple[str, float, float | None, list[tuple[float, float]]]],
                 windows: dict[str, tuple[float, float]] | None = None):
        times = sorted({t for w in workloads for t, _ in w[3]})
        gaps = sorted(b - a for a, b in zip(times, times[1:]) if b > a)
        self.tick = gaps[len(gaps) // 2] if gaps else 0.2  # the driver's tick, as the samples came
        self.gap = max(MIN_GAP_S, GAP_TICKS * self.tick)
        self.edge = min(EDGE_TICKS * self.tick, EDGE_MAX_S)
        self.near = NEAR_TICKS * self.tick
        self.presence = {name: (start, math.inf if end is None else end) for name, start, end, _ in workloads}
        self.spans: dict[str, list[list[float]]] = {}
        self.moved: dict[str, list[tuple[float, float]]] = {}  # stretches step 2 added to a span
        for name, _, _, points in workloads:
            lo, hi = self.presence[name]
            spans: list[list[float]] = []
            for t in sorted(t for t, v in points if v >= BUSY_PCT):
                if spans and t - spans[-1][1] <= self.gap:
                    spans[-1][1] = t
                else:
                    spans.append([t - self.tick, t])
            self.spans[name] = [[max(a, lo), min(b, hi)] for a, b in spans if min(b, hi) > max(a, lo)]
            self.moved[name] = []
        self._edges(windows or {})
        self.regimes: dict[frozenset, Regime] = {}
        for name, _, _, points in workloads:
            for t, v in points:
                if v < BUSY_PCT:
                    continue
                busy = self.busy_at(t - self.tick / 2)
                if name in busy and len(busy) > 1:
                    self.regimes.setdefault(busy, Regime(busy)).named.append((t, name))
        for regime in self.regimes.values():
            regime.weigh()

    def _edges(self, windows: dict[str, tuple[float, float]]) -> None:
        keys = [(n, i) for n, spans in self.spans.items() for i in range(len(spans))]
        orig = {k: tuple(self.spans[k[0]][k[1]]) for k in keys}
        new = {k: list(v) for k, v in orig.items()}
        fixed = {k: [False, False] for k in keys}
        for (n, i), (a, b) in orig.items():  # (a) the workload's own clock
            w = windows.get(n)
            if w is None:
                continue
            if -self.tick <= a - w[0] <= self.edge:
                new[(n, i)][0], fixed[(n, i)][0] = w[0], True
            if -self.tick <= w[1] - b <= self.edge:
                new[(n, i)][1], fixed[(n, i)][1] = w[1], True

        def alive(n: str, a: float, b: float) -> bool:
            lo, hi = self.presence[n]
            return lo <= a and b <= hi

        for x in keys:  # (b) edges the ticks cannot order
            for y in keys:
                if x[0] == y[0]:
                    continue
                (a1, b1), (a2, b2) = new[x], new[y]
                if (not any(fixed[x]) and abs(a1 - a2) <= self.edge and abs(b1 - b2) <= self.edge
                        and alive(x[0], min(a1, a2), max(b1, b2)) and alive(y[0], min(a1, a2), max(b1, b2))):
                    new[x] = [min(a1, a2), max(b1, b2)]
                    continue
                if not fixed[x][0] and abs(a1 - a2) <= self.near:
                    new[x][0] = min(a1, a2)
                if not fixed[x][1] and abs(b1 - b2) <= self.near:
                    new[x][1] = max(b1, b2)

        def beside(n: str, t: float) -> bool:
            return any(m != n and a <= t <= b for m, spans in self.spans.items() for a, b in spans)

        for k, span in new.items():  # (c) an edge hidden in another's run
            oa, ob = orig[k]
            if span[0] == oa and not fixed[k][0] and beside(k[0], oa - self.tick / 2):
                span[0] = oa - RESIDUAL_TICKS * self.tick
            if span[1] == ob and not fixed[k][1] and beside(k[0], ob + self.tick / 2):
                span[1] = ob + RESIDUAL_TICKS * self.tick
        for (n, i), (a, b) in new.items():
            lo, hi = self.presence[n]
            a, b = max(a, lo), min(b, hi)
            oa, ob = orig[(n, i)]
            if a < oa:
                self.moved[n].append((a, oa))
            if b > ob:
                self.moved[n].append((ob, b))
            self.spans[n][i] = [a, b]

    def busy_at(self, t: float) -> frozenset:
        return frozenset(n for n, spans in self.spans.items() if any(a < t <= b for a, b in spans))

    def was_moved(self, name: str, t: float) -> bool:
        """Whether t lies in a stretch that step 2 added to the workload's busy span."""
        return any(a < t <= b for a, b in self.moved.get(name, ()))

    def shares(self, t: float, present: list[str]) -> dict[str, tuple[float, float, float]]:
        """{name: (weight, low, high)} of the active energy at t among the busy workloads present; {} when
        none of them is busy."""
        busy = self.busy_at(t) & frozenset(present)
        if not busy:
            return {}
        if len(busy) == 1:
            return {n: (1.0, 1.0, 1.0) for n in busy}
        regime = self.regimes.get(busy)
        if regime is None:  # busy together, but no tick inside says anything about the split
            fair = 1.0 / len(busy)
            return {n: (fair, 0.0, 1.0) for n in busy}
        return {n: (regime.weights[n], regime.low[n], regime.high[n]) for n in busy}
