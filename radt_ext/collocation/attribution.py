"""Each collocated workload's share of the GPU's energy, from what the listeners logged.

Pure functions: no NVML, no MLflow. Inputs are (time s, value) series:

- the GPU's power (`gpu{i}_power_w` of the group's parent, any sample rate) and, where
  present, its energy counter (`gpu{i}_energy_j`), which fixes the total: each counter
  interval's energy is spread over the power samples inside it by their shape;
- per workload, its activity on that GPU (`gpu{i}_proc_sm_pct` of its child run, or under
  MIG its instance's GPM `sm_active_pct` times the instance's fraction of the GPU). A value
  logged at time t describes the period before t (NVML's per-process samples do). NVML names
  one process per sampling tick (~200 ms on an H100): with per-process samples (`one_per_tick`,
  a time-sliced GPU) who was busy when, and each one's share while several were, come from
  `time_slicing.TimeSlices`; concurrent samples (MIG instances' GPM) weigh the workloads directly.
  Where the workloads on a time-sliced (or MPS) GPU all report progress, their own work decides instead
  (`work_shares.WorkShares`): busy from first to last progress mark, shares by work over rate alone, and
  the stretches where none of them works (start-up, tear-down) pooled by each one's time outside its work.

Each interval between two samples is split in two parts:

- idle: the GPU's floor power x the interval. It is the price of holding the GPU, which
  every workload present pays: it is split evenly among the workloads running then
  (a workload alone pays all of it, as in an exclusive run, so the two compare like for like);
- active: the rest, split among the workloads busy in that interval: on a time-sliced GPU by
  their time shares (equal while the ticks agree), else in proportion to their activity. When no
  workload reports any activity (samples missing, start-up, copies only, MPS clients that
  NVML does not sample) it is split evenly among the workloads running then, and counted in
  `even_split_s`.

Each share also gets the interval the samples allow (`Share.low_j` / `high_j`): where the active part
was split evenly for want of samples, anything from none of it to all of it; on a time-sliced GPU, the
time share's interval from the ticks (see `time_slicing`); MIG instances' concurrent activity, none.

Energy in intervals where no workload runs (before the first starts, after the last ends)
is the group's, `unattributed_j`. Workloads' shares plus `unattributed_j` add up to the
counter's energy (or the power integral where no counter was logged).
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from radt_ext.collocation.time_slicing import TimeSlices
from radt_ext.collocation.work_shares import Progress, WorkShares, usable

IDLE_QUANTILE = 0.05  # the GPU's floor power: this time-weighted quantile of the group's power
MIN_GAP_S = 1.0  # an activity sample counts for at most max(this, 3 x its median spacing)

Points = list[tuple[float, float]]


@dataclass
class WorkloadActivity:
    name: str
    start: float  # s since the epoch, when it was started
    end: float | None  # when it ended (None: still running at the group's end)
    activity: Points  # (t, SM %) samples
    scale: float = 1.0  # MIG: its instance's fraction of the GPU's SMs
    window: tuple[float, float] | None = None  # its first and last progress mark, where it has them
    progress: Points | None = None  # (t, cumulative work) at its progress records, where it has them
    kind: str = ""  # workloads of one kind (the same command) run at the same rate alone


@dataclass
class Share:
    energy_j: float = 0.0  # active + idle
    active_j: float = 0.0
    idle_j: float = 0.0
    low_j: float = 0.0  # the lowest energy_j the samples allow
    high_j: float = 0.0  # the highest
    timeline: Points = field(default_factory=list)  # (interval end, attributed W)


@dataclass
class Attribution:
    total_j: float
    idle_power_w: float
    idle_j: float  # the idle part of every interval, workloads' and the group's
    unattributed_j: float  # intervals with no workload running: the group's
    even_split_s: float  # seconds where no workload reported activity and the active part was split evenly
    power_integral_j: float  # trapezoid of the power samples alone, for comparison with the counter
    shares: dict[str, Share]
    work_split_s: float = 0.0  # seconds whose active part was split by the workloads' own progress
    overhead_pooled_s: float = 0.0  # seconds of start-up/tear-down shared by each workload's overhead time

    def check(self) -> float:
        """Relative gap between the parts and the total (0 when they add up)."""
        parts = sum(s.energy_j for s in self.shares.values()) + self.unattributed_j
        return abs(parts - self.total_j) / self.total_j if self.total_j else 0.0


def _clean(points: Points) -> Points:
    """Sorted by time, finite values only, one value per time (the last)."""
    out: dict[float, float] = {}
    for t, v in points:
        if t is not None and v is not None and math.isfinite(t) and math.isfinite(v):
            out[float(t)] = float(v)
    return sorted(out.items())


def _interp(points: Points, times: list[float], t: float) -> float:
    i = bisect.bisect_left(times, t)
    if i < len(times) and times[i] == t:
        return points[i][1]
    if i == 0:
        return points[0][1]
    if i == len(points):
        return points[-1][1]
    (t0, v0), (t1, v1) = points[i - 1], points[i]
    return v0 + (v1 - v0) * (t - t0) / (t1 - t0)


def segments(power: Points, energy: Points | None = None) -> tuple[list[float], list[float], float]:
    """(grid times, energy J of each interval between consecutive grid times, power integral J).

    The grid is every power and counter sample time. Without a counter an interval's energy is
    the trapezoid of power; with one, each counter interval's energy is spread over the intervals
    inside it in proportion to their power integral. Intervals inside it without power samples count
    at the mean power of those with them (evenly in time when it has no power samples at all), so a
    counter read rarely (once for the whole run) keeps the power's shape.
    A counter that goes backwards (reset) leaves that interval to the power integral.
    """
    power, energy = _clean(power), _clean(energy or [])
    grid = sorted({t for t, _ in power} | {t for t, _ in energy})
    if len(grid) < 2:
        return grid, [], 0.0
    ptimes = [t for t, _ in power]
    raw = []
    for a, b in zip(grid, grid[1:]):
        if len(power) >= 1 and power[0][0] <= a and b <= power[-1][0]:
            raw.append((b - a) * (_interp(power, ptimes, a) + _interp(power, ptimes, b)) / 2.0)
        else:
            raw.append(math.nan)  # outside the power samples
    integral = sum(e for e in raw if not math.isnan(e))
    out = [0.0 if math.isnan(e) else e for e in raw]
    for (c0, e0), (c1, e1) in zip(energy, energy[1:]):
        delta = e1 - e0
        if delta < 0:
            continue
        i, j = bisect.bisect_left(grid, c0), bisect.bisect_left(grid, c1)
        inside = range(i, j)  # intervals [grid[k], grid[k+1]] within [c0, c1]
        known_j = sum(raw[k] for k in inside if not math.isnan(raw[k]))
        known_s = sum(grid[k + 1] - grid[k] for k in inside if not math.isnan(raw[k]))
        if known_j > 0 and known_s > 0:
            # a part without power (a counter read just past the last power sample, a gap in the
            # samples) takes the mean power of the rest, so the shape of the rest is kept
            mean_w = known_j / known_s
            shape = [mean_w * (grid[k + 1] - grid[k]) if math.isnan(raw[k]) else raw[k] for k in inside]
            scale = delta / sum(shape)
            for k, e in zip(inside, shape):
                out[k] = e * scale
        else:
            for k in inside:
                out[k] = delta * (grid[k + 1] - grid[k]) / (c1 - c0)
    return grid, out, integral


def idle_power(grid: list[float], energy: list[float], quantile: float = IDLE_QUANTILE) -> float:
    """The time-weighted `quantile` of the intervals' mean power: the GPU's floor in this group."""
    rows = sorted(((e / (b - a), b - a) for a, b, e in zip(grid, grid[1:], energy) if b > a))
    if not rows:
        return 0.0
    total = sum(dt for _, dt in rows)
    seen = 0.0
    for power, dt in rows:
        seen += dt
        if seen >= quantile * total:
            return max(0.0, power)
    return max(0.0, rows[-1][0])


class _Lookup:
    """A workload's activity at a time: the first sample at or after it (samples look back),
    else the last one before it, if within the gap; None when there is none that close."""

    def __init__(self, points: Points):
        self.points = _clean(points)
        self.times = [t for t, _ in self.points]
        gaps = sorted(b - a for a, b in zip(self.times, self.times[1:]) if b > a)
        self.max_gap = max(MIN_GAP_S, 3 * gaps[len(gaps) // 2]) if gaps else MIN_GAP_S

    def at(self, t: float) -> float | None:
        i = bisect.bisect_left(self.times, t)
        if i < len(self.times) and self.times[i] - t <= self.max_gap:
            return max(0.0, self.points[i][1])
        if i > 0 and t - self.times[i - 1] <= self.max_gap:
            return max(0.0, self.points[i - 1][1])
        return None


def attribute(power: Points, workloads: list[WorkloadActivity], energy: Points | None = None,
              idle_power_w: float | None = None, one_per_tick: bool = False) -> Attribution:
    """Split one GPU's energy among the workloads that shared it (see the module's docstring).

    `one_per_tick`: the samples are NVML's per-process ones on a time-sliced GPU, where each driver
    tick names a single process: busy spans and time shares come from `TimeSlices` (with each
    workload's progress `window` for its edges). Otherwise (MIG instances' GPM, read concurrently)
    each workload's own latest sample weighs it.
    """
    grid, seg, integral = segments(power, energy)
    idle_w = idle_power(grid, seg) if idle_power_w is None else max(0.0, idle_power_w)
    # each timeline opens at the grid's start, so its first interval has a start (energy_in reads it)
    shares = {w.name: Share(timeline=[(grid[0], 0.0)] if grid else []) for w in workloads}
    slices = lookups = None
    if one_per_tick:
        slices = TimeSlices([(w.name, w.start, w.end, _clean(w.activity)) for w in workloads],
                            {w.name: w.window for w in workloads if w.window})
    else:
        lookups = {w.name: _Lookup(w.activity) for w in workloads}
    work = None
    if one_per_tick and any(w.progress and usable(w.progress) for w in workloads):
        work = WorkShares([Progress(w.name, w.kind or w.name, list(w.progress)) for w in workloads
                           if w.progress and usable(w.progress)])
    overhead = _overhead(work, workloads, grid[-1] if grid else 0.0)
    idle_total = unattributed = even = by_work = pooled_s = 0.0
    for a, b, e in zip(grid, grid[1:], seg):
        dt = b - a
        mid = (a + b) / 2.0
        present = [w for w in workloads if w.start <= mid and (w.end is None or mid < w.end)]
        idle = min(e, idle_w * dt) if e > 0 else 0.0
        idle_total += idle
        if not present:
            unattributed += e
            for s in shares.values():
                s.timeline.append((b, 0.0))
            continue
        active = e - idle
        from_work = _from_work(work, slices, mid, [w.name for w in present])
        if from_work is not None:
            weights, bounds = from_work
            by_work += dt
        elif slices is not None:
            got = slices.shares(mid, [w.name for w in present])
            weights = {w.name: got[w.name][0] if w.name in got else 0.0 for w in present}
            bounds = {n: (lo, hi) for n, (_, lo, hi) in got.items()}
        else:
            weights, bounds = {}, {}
            for w in present:
                value = lookups[w.name].at(mid)
                weights[w.name] = 0.0 if value is None else value * w.scale
        busy = sum(weights.values())
        evenly = busy <= 0
        if evenly:  # nobody reports activity: even, and the samples allow anything
            weights = {w.name: 1.0 for w in present}
            busy = float(len(present))
            even += dt
            bounds = {w.name: (0.0, 1.0) for w in present}
        parts = {n: active * v / busy for n, v in weights.items()}
        part_idle = idle / len(present)
        if overhead and from_work is None and not (work.busy_at(mid) & {w.name for w in present}):
            # nobody working by its own clock (start-up, tear-down): the group's overhead, pooled
            pooled_s += dt
            even -= dt if evenly else 0.0  # split by the overhead, not evenly
            for w in workloads:
                s = shares[w.name]
                f = overhead.get(w.name, 0.0)
                alone = parts.get(w.name, 0.0) + (part_idle if w.name in parts else 0.0)
                lo, hi = (active * x for x in bounds.get(w.name, (0.0, 0.0)))
                lo, hi = lo + (part_idle if w.name in parts else 0.0), hi + (part_idle if w.name in parts else 0.0)
                s.active_j += active * f
                s.idle_j += idle * f
                s.energy_j += e * f
                s.low_j += min(e * f, alone, lo)
                s.high_j += max(e * f, alone, hi)
                s.timeline.append((b, e * f / dt if dt > 0 else 0.0))
            continue
        for w in workloads:
            s = shares[w.name]
            if w.name not in parts:
                s.timeline.append((b, 0.0))
                continue
            part = parts[w.name]
            lo, hi = (active * x for x in bounds[w.name]) if w.name in bounds else (part, part)
            s.active_j += part
            s.idle_j += part_idle
            s.energy_j += part + part_idle
            s.low_j += lo + part_idle
            s.high_j += hi + part_idle
            s.timeline.append((b, (part + part_idle) / dt if dt > 0 else 0.0))
        if from_work is None and slices is not None and active > 0:  # a stretch added to a busy span at its edge: maybe not busy
            for n, part in parts.items():
                if part > 0 and slices.was_moved(n, mid):
                    shares[n].low_j -= part
                    for m in parts:
                        if m != n:
                            shares[m].high_j += part
    for s in shares.values():
        s.low_j = max(0.0, min(s.low_j, s.energy_j))
        s.high_j = max(s.high_j, s.energy_j)
    total = sum(seg)
    return Attribution(total_j=total, idle_power_w=idle_w, idle_j=idle_total, unattributed_j=unattributed,
                       even_split_s=even, power_integral_j=integral, shares=shares, work_split_s=by_work,
                       overhead_pooled_s=pooled_s)


def _overhead(work: WorkShares | None, workloads: list[WorkloadActivity], last: float) -> dict[str, float]:
    """{name: fraction} of the group's overhead (the energy while workloads are present but none is working
    by its own progress: start-up, tear-down) each pays: its own time present outside its work, over the
    sum of them. Empty unless every workload reported progress."""
    if work is None or not work.covers([w.name for w in workloads]):
        return {}
    own = {}
    for w in workloads:
        lo, hi = work.progress[w.name].span
        end = last if w.end is None else w.end
        own[w.name] = max(0.0, (end - w.start) - (min(hi, end) - max(lo, w.start)))
    total = sum(own.values())
    return {n: v / total for n, v in own.items()} if total > 0 else {}


def _from_work(work: WorkShares | None, slices: TimeSlices | None, t: float, present: list[str]):
    """(weights, bounds) of the active energy at t from the workloads' own progress (`work_shares`), or
    None where it cannot tell (a workload present without progress, none busy by its marks, or work that
    does not fix the split). The bounds join the split by work with the equal time share and the driver's
    ticks (their interval): where the estimators disagree, the interval says so."""
    if work is None or not work.covers(present):
        return None
    got = work.split(t)
    if not got:
        return None
    busy = [n for n in got if n in present]
    if not busy:
        return None
    if len(busy) == 1:
        return {n: (1.0 if n in busy else 0.0) for n in present}, {busy[0]: (1.0, 1.0)}
    weights = {n: got.get(n, 0.0) for n in present}
    ticks = slices.shares(t, busy) if slices is not None else {}
    fair = 1.0 / len(busy)
    bounds = {}
    for n in busy:
        lo, hi = (ticks[n][1], ticks[n][2]) if n in ticks and len(ticks) == len(busy) else (0.0, 1.0)
        bounds[n] = (min(lo, fair, weights[n]), max(hi, fair, weights[n]))
    return weights, bounds


def binned(timeline: Points, start: float, width_s: float) -> Points:
    """A per-interval power timeline as bins of `width_s` (energy-weighted mean W, at each bin's end);
    keeps a logged timeline small when power comes at tens of Hz."""
    if width_s <= 0 or not timeline:
        return list(timeline)
    out: Points = []
    prev = start
    acc_e = acc_t = 0.0
    edge = start + width_s
    for t, w in timeline:
        dt = t - prev
        if dt > 0:
            acc_e += w * dt
            acc_t += dt
        prev = t
        if t >= edge:
            out.append((t, acc_e / acc_t if acc_t > 0 else 0.0))
            acc_e = acc_t = 0.0
            edge = t + width_s
    if acc_t > 0:
        out.append((prev, acc_e / acc_t))
    return out
