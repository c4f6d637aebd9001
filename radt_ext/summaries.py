"""Streaming summaries: each sample updates a few numbers; nothing is read back from MLflow.

`Summaries.add(name, t, value)` keeps, per metric name, count, mean, min, max,
first/last value and the time integral (trapezoid rule). `Summaries.result()`
turns those into the `summary/*` metrics logged once at the end of a run.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass


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

    def add(self, t: float, v: float) -> None:
        if self.count == 0:
            self.first_t, self.first_v = t, v
        elif t > self.last_t:
            self.integral += (t - self.last_t) * (v + self.last_v) / 2.0
        self.count += 1
        self.total += v
        if v < self.min:
            self.min = v
        if v > self.max:
            self.max = v
        self.last_t, self.last_v = t, v

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


# Per-device metric families: listener names such as gpu0_power_w, cpu1_package_energy_j.
_GPU = re.compile(r"^gpu(\d+)_(?P<field>[a-z0-9_]+)$")
_CPU = re.compile(r"^cpu(\d+)_(?P<field>[a-z0-9_]+)$")


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
                    stat = stats[name] = Stat()
                stat.add(t, value)

    def stat(self, name: str) -> Stat | None:
        return self._stats.get(name)

    def _family(self, pattern: re.Pattern, field: str) -> list[Stat]:
        out = []
        for name, stat in self._stats.items():
            m = pattern.match(name)
            if m and m.group("field") == field:
                out.append(stat)
        return out

    def _counted(self, stat: Stat) -> float:
        return stat.last_v if self.counters_from_zero else stat.last_v - stat.first_v

    def result(self, duration_s: float, progress: dict[str, float] | None = None) -> dict[str, float]:
        """The `summary/*` values (names without the prefix). Absent sources give absent keys."""
        with self._lock:
            gpu = lambda field: self._family(_GPU, field)  # noqa: E731
            cpu = lambda field: self._family(_CPU, field)  # noqa: E731
            out: dict[str, float] = {"duration_s": duration_s}

            energy = gpu("energy_j")  # counter, J since the listener opened
            power = gpu("power_w")
            if energy:
                out["gpu_energy_j"] = sum(self._counted(s) for s in energy)
            if power:
                out["gpu_energy_integrated_j"] = sum(s.integral for s in power)
                out["gpu_avg_power_w"] = sum(s.time_mean for s in power)
                out["gpu_peak_power_w"] = max(s.max for s in power)
            if energy and power and all(s.span > 0 for s in energy):
                # the counter is the better average: it integrates in hardware
                out["gpu_avg_power_w"] = sum((s.last_v - s.first_v) / s.span for s in energy)
            for field, key, agg in (
                ("temp_c", "gpu_peak_temp_c", max),
                ("mem_temp_c", "gpu_peak_mem_temp_c", max),
                ("mem_used_mib", "gpu_peak_mem_mib", max),
                ("sm_clock_mhz", "gpu_peak_sm_clock_mhz", max),
            ):
                stats = gpu(field)
                if stats:
                    out[key] = agg(s.max for s in stats)
            for field, key in (
                ("sm_active_pct", "gpu_avg_sm_active_pct"),
                ("sm_occupancy_pct", "gpu_avg_sm_occupancy_pct"),
                ("tensor_active_pct", "gpu_avg_tensor_active_pct"),
                ("dram_active_pct", "gpu_avg_dram_active_pct"),
                ("util_pct", "gpu_avg_util_pct"),
                ("temp_c", "gpu_avg_temp_c"),
            ):
                stats = gpu(field)
                if stats:
                    out[key] = sum(s.time_mean for s in stats) / len(stats)

            cpu_energy = cpu("package_energy_j") + cpu("dram_energy_j")
            if cpu_energy:
                out["cpu_energy_j"] = sum(self._counted(s) for s in cpu_energy)
            for name, key in (("proc_rss_mib", "proc_peak_rss_mib"), ("host_mem_used_mib", "host_peak_mem_mib")):
                stat = self._stats.get(name)
                if stat:
                    out[key] = stat.max
            stat = self._stats.get("proc_cpu_pct")
            if stat:
                out["proc_avg_cpu_pct"] = stat.time_mean

        progress = progress or {}
        samples = progress.get("samples", 0.0)
        if samples > 0:
            out["samples"] = samples
            if duration_s > 0:
                out["throughput_samples_per_s"] = samples / duration_s
            if "gpu_energy_j" in out:
                out["energy_per_sample_j"] = out["gpu_energy_j"] / samples
            if "cpu_energy_j" in out:
                out["cpu_energy_per_sample_j"] = out["cpu_energy_j"] / samples
        flops = progress.get("flops", 0.0)
        if flops > 0 and duration_s > 0:
            out["achieved_tflops"] = flops / duration_s / 1e12
        return out


def with_span_energy(out: dict[str, float], energy: dict[str, tuple[float, float]],
                     progress: dict[str, float] | None = None) -> dict[str, float]:
    """`out` (a `Summaries.result`) with the GPU energy of the run's own span: `gpu_energy_j` from each
    GPU's (joules, seconds) of `radt_ext.energy.span_energy_j`, and what derives from it (the counter's
    average power, energy per sample), in place of the difference of the points the run was handed."""
    if not energy:
        return out
    out["gpu_energy_j"] = sum(j for j, _ in energy.values())
    if "gpu_avg_power_w" in out and all(s > 0 for _, s in energy.values()):
        out["gpu_avg_power_w"] = sum(j / s for j, s in energy.values())  # the counter integrates in hardware
    samples = (progress or {}).get("samples", 0.0)
    if samples > 0:
        out["energy_per_sample_j"] = out["gpu_energy_j"] / samples
    return out
