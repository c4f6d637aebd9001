"""Streaming summaries: each sample updates a few numbers; nothing is read back from MLflow.

`Summaries.add(name, t, value)` keeps, per metric name, count, mean, min, max and first/last value;
for the metrics a summary reads over a window (power, energy, temperatures, memory, SM/tensor/DRAM
activity, utilization; CPU energy, the process's memory and CPU) also the time integral (trapezoid
rule) and a bounded log of cumulative checkpoints (time, value, integral so far, largest value since
the previous checkpoint). Any window's figures are then
differences of cumulative values at its edges, interpolated between checkpoints: the active phase,
the whole run, a collocation group's overlap, all from the same numbers.

The log keeps every sample up to CHECKPOINTS entries; beyond that its older three quarters are
thinned to every other checkpoint (each kept one is still an exact value of the cumulative
integral, and segment maxima are merged), so memory stays bounded and only edges that fall in a
thinned stretch of a long run are interpolated over more than one sampling interval.

`Summaries.result()` turns those into the `summary/*` metrics logged once at the end of a run:
unprefixed over the active phase, `e2e_` + the same name over the whole run (docs/runs.md).
"""
from __future__ import annotations

import bisect
import re
import threading
from array import array
from dataclasses import dataclass, field

CHECKPOINTS = 8192


@dataclass
class Stat:
    count: int = 0
    total: float = 0.0
    min: float = float("inf")
    max: float = float("-inf")
    first_t: float = 0.0
    first_v: float = 0.0
    last_t: float = 0.0
    last_v: float = 0.0
    integral: float = 0.0  # value x seconds, trapezoid between consecutive samples
    # the checkpoint log: time, value, integral up to then, max over the samples since the previous checkpoint
    ts: array = field(default_factory=lambda: array("d"))
    vs: array = field(default_factory=lambda: array("d"))
    cs: array = field(default_factory=lambda: array("d"))
    ms: array = field(default_factory=lambda: array("d"))
    log: bool = True  # False: a metric no summary reads over a window (the plain figures only, no log)

    def add(self, t: float, v: float) -> None:
        if not self.log:
            if self.count == 0:
                self.first_t, self.first_v = t, v
            self.count += 1
            self.total += v
            self.min, self.max = min(self.min, v), max(self.max, v)
            self.last_t, self.last_v = t, v
            return
        if self.count == 0:
            self.first_t, self.first_v = t, v
        elif t > self.last_t:
            self.integral += (t - self.last_t) * (v + self.last_v) / 2.0
        elif self.ts:  # a second value at the same time (the checkpoint keeps it), or a late one (counted only)
            self.count += 1
            self.total += v
            self.min, self.max = min(self.min, v), max(self.max, v)
            if t == self.last_t:
                self.last_v = v
                self.vs[-1], self.ms[-1] = v, max(self.ms[-1], v)
            return
        self.count += 1
        self.total += v
        if v < self.min:
            self.min = v
        if v > self.max:
            self.max = v
        self.last_t, self.last_v = t, v
        self.ts.append(t)
        self.vs.append(v)
        self.cs.append(self.integral)
        self.ms.append(v)
        if len(self.ts) >= CHECKPOINTS:
            self._thin()

    def _thin(self) -> None:
        n0 = (len(self.ts) * 3 // 4) & ~1  # even: index n0 (kept) takes over the dropped n0-1's segment
        ms = self.ms
        merged = array("d", [ms[0]] + [max(ms[i - 1], ms[i]) for i in range(2, n0, 2)])
        ms[n0] = max(ms[n0 - 1], ms[n0])
        for log in (self.ts, self.vs, self.cs):
            log[:n0] = log[0:n0:2]
        self.ms[:n0] = merged

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else float("nan")

    @property
    def span(self) -> float:
        return self.last_t - self.first_t

    @property
    def time_mean(self) -> float:
        """Time-weighted mean; the plain mean when there is one sample only."""
        return self.integral / self.span if self.span > 0 else self.mean

    # -- windows ---------------------------------------------------------------------------
    def value_at(self, x: float) -> float:
        """The value at time x, linear between checkpoints, the first/last value outside them."""
        ts, vs = self.ts, self.vs
        k = bisect.bisect_right(ts, x) - 1
        if k < 0:
            return vs[0]
        if k >= len(ts) - 1:
            return vs[-1]
        s = (x - ts[k]) / (ts[k + 1] - ts[k])
        return vs[k] + s * (vs[k + 1] - vs[k])

    def integral_at(self, x: float) -> float:
        """The integral from the first sample to time x."""
        ts, vs, cs = self.ts, self.vs, self.cs
        k = bisect.bisect_right(ts, x) - 1
        if k < 0:
            return 0.0
        if k >= len(ts) - 1:
            return cs[-1]
        dt = ts[k + 1] - ts[k]
        s = (x - ts[k]) / dt
        part = (x - ts[k]) * (vs[k] + vs[k] + s * (vs[k + 1] - vs[k])) / 2.0
        full = dt * (vs[k] + vs[k + 1]) / 2.0
        rise = cs[k + 1] - cs[k]  # equals `full` unless this stretch was thinned
        return cs[k] + (rise * part / full if full else rise * s)

    def covered(self, a: float, b: float) -> tuple[float, float]:
        """The part of [a, b] inside the samples' span."""
        return max(a, self.first_t), min(b, self.last_t)

    def time_mean_over(self, a: float, b: float) -> float:
        lo, hi = self.covered(a, b)
        if hi > lo:
            return (self.integral_at(hi) - self.integral_at(lo)) / (hi - lo)
        return self.value_at(min(max(a, self.first_t), self.last_t))

    def integral_over(self, a: float, b: float) -> float:
        lo, hi = self.covered(a, b)
        return self.integral_at(hi) - self.integral_at(lo) if hi > lo else 0.0

    def rise_over(self, a: float, b: float, from_zero: bool = False) -> float:
        """A counter's increase over [a, b]; from_zero: it read 0 at (or before) a."""
        return self.value_at(b) - (0.0 if from_zero else self.value_at(a))

    def reaching(self, level: float, a: float, b: float) -> tuple[float, float] | None:
        """The first and the last time in [a, b] the value was at least `level` (in a thinned stretch,
        to its checkpoints); None when it never was."""
        ts, vs, ms = self.ts, self.vs, self.ms
        hits = [i for i in range(bisect.bisect_left(ts, a), bisect.bisect_right(ts, b)) if ms[i] >= level]
        if not hits:
            return None
        first = hits[0]
        return (ts[first] if vs[first] >= level or first == 0 else ts[first - 1]), ts[hits[-1]]

    def peak_over(self, a: float, b: float) -> float:
        ts = self.ts
        i0, i1 = bisect.bisect_left(ts, a), bisect.bisect_right(ts, b)
        if i1 <= i0:  # no sample inside: the values at the edges
            return max(self.value_at(a), self.value_at(b))
        return max(self.vs[i0], max(self.ms[i0 + 1:i1], default=float("-inf")))


# Per-device metric families: listener names such as gpu0_power_w, cpu1_package_energy_j.
_GPU = re.compile(r"^gpu(?P<index>\d+)_(?P<field>[a-z0-9_]+)$")
_CPU = re.compile(r"^cpu(?P<index>\d+)_(?P<field>[a-z0-9_]+)$")
# (listener field, summary name per GPU, name across GPUs): peaks take the highest GPU's,
# averages the mean of the GPUs' own averages
PEAKS = (("power_w", "peak_power_w", "gpu_max_peak_power_w"),
         ("temp_c", "peak_temp_c", "gpu_max_peak_temp_c"),
         ("mem_temp_c", None, "gpu_max_peak_mem_temp_c"),
         ("mem_used_mib", "peak_mem_mib", "gpu_max_peak_mem_mib"),
         ("sm_clock_mhz", None, "gpu_max_peak_sm_clock_mhz"))
AVERAGES = (("sm_active_pct", "avg_sm_active_pct", "gpu_mean_avg_sm_active_pct"),
            ("sm_occupancy_pct", None, "gpu_mean_avg_sm_occupancy_pct"),
            ("tensor_active_pct", "avg_tensor_active_pct", "gpu_mean_avg_tensor_active_pct"),
            ("dram_active_pct", "avg_dram_active_pct", "gpu_mean_avg_dram_active_pct"),
            ("util_pct", "avg_util_pct", "gpu_mean_avg_util_pct"),
            ("temp_c", None, "gpu_mean_avg_temp_c"))
BUSY_PCT = 10.0  # a GPU counts as busy from this utilization (SM active where utilization is not read)
# what figures() and busy() read over windows; every other metric keeps no checkpoint log
_WINDOWED_GPU = {"energy_j", *(f for f, _, _ in PEAKS), *(f for f, _, _ in AVERAGES)}
_WINDOWED_CPU = {"package_energy_j", "dram_energy_j"}
_WINDOWED = {"proc_rss_mib", "host_mem_used_mib", "proc_cpu_pct"}
E2E = "e2e_"  # the whole run; unprefixed: the active phase (radt_ext/figures/summary_names.py)


def _windowed(name: str) -> bool:
    """Whether a summary reads this metric over a window (so its Stat keeps the checkpoint log)."""
    if m := _GPU.match(name):
        return m.group("field") in _WINDOWED_GPU
    if m := _CPU.match(name):
        return m.group("field") in _WINDOWED_CPU
    return name in _WINDOWED


def counts_per_s(out: dict[str, float], counts: dict[str, float] | None, seconds: float) -> None:
    """Samples, throughput (samples/s, steps/s), energy per sample and TFLOP/s from the workload's counts
    over a window."""
    counts = counts or {}
    samples = counts.get("samples", 0.0)
    if samples > 0:
        out["samples"] = samples
        if seconds > 0:
            out["throughput_samples_per_s"] = samples / seconds
        if "gpu_total_energy_j" in out:
            out["energy_per_sample_j"] = out["gpu_total_energy_j"] / samples
        if "cpu_energy_j" in out:
            out["cpu_energy_per_sample_j"] = out["cpu_energy_j"] / samples
    steps = counts.get("steps", 0.0)
    if steps > 0 and seconds > 0:  # the rate of work where samples are not known (the guard's and planner's too)
        out["throughput_steps_per_s"] = steps / seconds
    flops = counts.get("flops", 0.0)
    if flops > 0 and seconds > 0:
        out["achieved_tflops"] = flops / seconds / 1e12


class Summaries:
    def __init__(self, counters_from_zero: bool = True) -> None:
        # energy counters read 0 when the listener opened; a window that starts later (one run of
        # several in a workload) counts its energy as the counter's rise over the window
        self.counters_from_zero = counters_from_zero
        self._stats: dict[str, Stat] = {}
        self._lock = threading.Lock()

    def add(self, name: str, t: float, value: float) -> None:
        self.add_all(t, ((name, value),))

    def add_all(self, t: float, values) -> None:
        """Several metrics read at one time t: (name, value) pairs."""
        stats = self._stats
        with self._lock:
            for name, value in values:
                stat = stats.get(name)
                if stat is None:
                    stat = stats[name] = Stat(log=_windowed(name))
                stat.add(t, value)

    def stat(self, name: str) -> Stat | None:
        return self._stats.get(name)

    def _gpus(self) -> dict[str, dict[str, Stat]]:
        """{GPU index: {field: Stat}}."""
        out: dict[str, dict[str, Stat]] = {}
        for name, stat in self._stats.items():
            m = _GPU.match(name)
            if m:
                out.setdefault(m.group("index"), {})[m.group("field")] = stat
        return out

    def figures(self, a: float, b: float, from_zero: bool = False, energy=None) -> dict[str, float]:
        """The hardware's figures over [a, b] (s since the epoch), names without a prefix; absent
        sources give absent keys. from_zero: energy counters read 0 at a (the whole run). energy: a
        radt_ext.figures.energy.EnergySeries whose `gpu{i}_energy_j` series reach beyond these points."""
        out: dict[str, float] = {}
        with self._lock:
            gpus = self._gpus()
            joules_per_gpu, integrated, power = [], [], []
            for i, fields in sorted(gpus.items(), key=lambda kv: int(kv[0])):
                counter, watts = fields.get("energy_j"), fields.get("power_w")
                if watts is not None:
                    integrated.append(watts.integral_over(a, b))
                span = energy.span(f"gpu{i}_energy_j", a, b) if energy is not None else None
                if span is not None:
                    joules, covered = span
                    avg = joules / covered if covered > 0 else None
                    if avg is None and watts is not None:
                        avg = watts.time_mean_over(a, b)
                elif counter is not None:
                    joules = counter.rise_over(a, b, from_zero)
                    lo, hi = counter.covered(a, b)
                    avg = counter.rise_over(lo, hi) / (hi - lo) if hi > lo else None
                    if avg is None and watts is not None:
                        avg = watts.time_mean_over(a, b)
                elif watts is not None:  # no counter: the power integral
                    joules, avg = integrated[-1], watts.time_mean_over(a, b)
                else:
                    joules = avg = None
                if joules is not None:
                    out[f"gpu{i}_energy_j"] = joules
                    joules_per_gpu.append(joules)
                if avg is not None:
                    out[f"gpu{i}_avg_power_w"] = avg
                    power.append(avg)
                for fld, own, _ in PEAKS:
                    if own and fld in fields:
                        out[f"gpu{i}_{own}"] = fields[fld].peak_over(a, b)
                for fld, own, _ in AVERAGES:
                    if own and fld in fields:
                        out[f"gpu{i}_{own}"] = fields[fld].time_mean_over(a, b)
            if gpus:
                out["gpu_count"] = float(len(gpus))
            if joules_per_gpu:
                out["gpu_total_energy_j"] = sum(joules_per_gpu)
            if integrated:
                out["gpu_total_energy_integrated_j"] = sum(integrated)
            if power:
                out["gpu_total_avg_power_w"] = sum(power)
            for fld, _, across in PEAKS:
                values = [f[fld].peak_over(a, b) for f in gpus.values() if fld in f]
                if values:
                    out[across] = max(values)
            for fld, _, across in AVERAGES:
                values = [f[fld].time_mean_over(a, b) for f in gpus.values() if fld in f]
                if values:
                    out[across] = sum(values) / len(values)

            cpu_energy = [s for n, s in self._stats.items()
                          if (m := _CPU.match(n)) and m.group("field") in ("package_energy_j", "dram_energy_j")]
            if cpu_energy:
                out["cpu_energy_j"] = sum(s.rise_over(a, b, from_zero) for s in cpu_energy)
            for name, key in (("proc_rss_mib", "proc_peak_rss_mib"), ("host_mem_used_mib", "host_peak_mem_mib")):
                stat = self._stats.get(name)
                if stat:
                    out[key] = stat.peak_over(a, b)
            stat = self._stats.get("proc_cpu_pct")
            if stat:
                out["proc_avg_cpu_pct"] = stat.time_mean_over(a, b)
        return out

    def busy(self, a: float, b: float) -> tuple[float, float] | None:
        """The first and last time in [a, b] any of the GPUs was busy (BUSY_PCT)."""
        spans = []
        with self._lock:
            for fields in self._gpus().values():
                stat = fields.get("util_pct") or fields.get("sm_active_pct")
                hit = stat.reaching(BUSY_PCT, a, b) if stat is not None else None
                if hit:
                    spans.append(hit)
        return (min(x for x, _ in spans), max(y for _, y in spans)) if spans else None

    def result(self, start: float, end: float, active=None, active_counts: dict[str, float] | None = None,
               e2e_counts: dict[str, float] | None = None, energy=None) -> dict[str, float]:
        """The `summary/*` values (names without the prefix) of a run spanning [start, end]:
        `e2e_*` over the whole run, unprefixed over `active` (a radt_ext.figures.active.Window; the whole run
        when None); counts = the workload's {samples, flops} over each."""
        whole = self.figures(start, end, from_zero=self.counters_from_zero, energy=energy)
        counts_per_s(whole, e2e_counts, end - start)
        out = {E2E + k: v for k, v in whole.items()}
        out["e2e_duration_s"] = max(0.0, end - start)
        if active is None:
            a, b = start, end
        else:
            a, b = max(active.start, start), min(active.end, end)
        b = max(a, b)
        if (a, b) == (start, end):
            mine = dict(whole)
            counts_per_s(mine, active_counts if active_counts is not None else e2e_counts, b - a)
        else:
            mine = self.figures(a, b, energy=energy)
            counts_per_s(mine, active_counts, b - a)
        out.update(mine)
        out["active_s"] = b - a
        out["startup_s"] = a - start
        busy = self.busy(start, end)
        if busy is not None:
            out["gpu_busy_from_s"], out["gpu_busy_until_s"] = busy[0] - start, busy[1] - start
        if end > start:
            out["startup_share_pct"] = 100.0 * (a - start) / (end - start)
        return out

