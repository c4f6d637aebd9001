"""A synthetic training run's listener readings, metric by metric, at the default listeners' rates.

For benchmarks of what the store takes and what the MLflow UI draws (store_ui.py); never a source of a
GPU figure. Per GPU: epochs of `EPOCH_S` seconds (busy, then a few seconds of evaluation at low power),
`nvml` (50 Hz driver power, 10 Hz fields, 4 Hz energy, PCIe every 5 s, throttle reasons), `gpm` and
`smi` at 2 Hz, `gpu_procs` (5 Hz per-process samples); once for the host, `top` at 1 Hz. Values are
quantized as the sources report them (mW, whole °C, MHz steps, whole percent). Seeded: the same run
every time.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

EPOCH_S = 60.0
EVAL_S = 5.0


def _busy(t: np.ndarray) -> np.ndarray:
    return (t % EPOCH_S) < (EPOCH_S - EVAL_S)


def _ticks(seconds: float, hz: float, rng, jitter: float = 0.1) -> np.ndarray:
    n = int(seconds * hz)
    return np.arange(n) / hz + rng.uniform(0, jitter / hz, n)


def metrics(seconds: float, gpus: int, seed: int = 1) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(listener metric name, times s from the start, values) for every metric of the run."""
    rng = np.random.default_rng(seed)
    for i in range(gpus):
        p = f"gpu{i}_"
        t = _ticks(seconds, 50, rng, 0.01)
        busy = _busy(t)
        power = np.where(busy, 640 + 35 * np.sin(t / 3.1 + i) + rng.normal(0, 25, t.size),
                         180 + rng.normal(0, 8, t.size))
        power = np.round(np.clip(power, 60, 700), 3)
        yield p + "power_w", t, power
        t4 = np.arange(0, seconds, 0.25)
        energy = np.interp(t4, t, np.concatenate([[0], np.cumsum(np.diff(t) * (power[1:] + power[:-1]) / 2)]))
        yield p + "energy_j", t4, np.round(energy, 3)
        t10 = _ticks(seconds, 10, rng)
        b10 = _busy(t10)
        smooth = np.convolve(power, np.ones(50) / 50, "same")  # NVML's ~1 s average
        yield p + "power_avg_w", t10, np.round(np.interp(t10, t, smooth), 3)
        temp = np.round(np.minimum(45 + t10 / 60, 72) + np.where(b10, 2, -3) + rng.normal(0, 0.3, t10.size))
        yield p + "temp_c", t10, temp
        yield p + "mem_temp_c", t10, np.round(temp + 8 + rng.normal(0, 0.45, t10.size))
        clock = np.where(b10, 1980 - 15 * rng.integers(0, 16, t10.size), 1980)
        yield p + "sm_clock_mhz", t10, clock.astype(float)
        yield p + "mem_clock_mhz", t10, np.full(t10.size, 2619.0)
        yield p + "util_pct", t10, np.where(b10, 100 - (rng.random(t10.size) < 0.1) * rng.integers(1, 4, t10.size),
                                            rng.integers(0, 30, t10.size)).astype(float)
        yield p + "mem_util_pct", t10, np.where(b10, rng.integers(38, 62, t10.size),
                                                rng.integers(0, 5, t10.size)).astype(float)
        yield p + "mem_used_mib", t10, np.where(t10 < 20, 1000 + t10 * 3000, 71234.0)
        yield p + "pstate_num", t10, np.zeros(t10.size)
        capped = (clock < 1980).astype(float)
        yield p + "throttle_power_cap_bool", t10, capped
        yield p + "throttle_mask_bits", t10, capped * 4
        for reason in ("idle", "app_clocks", "thermal_sw", "thermal_hw", "hw_slowdown", "power_brake_hw",
                       "sync_boost", "display_clocks"):
            yield p + f"throttle_{reason}_bool", t10, np.zeros(t10.size)
        t5 = np.arange(0, seconds, 5.0)
        yield p + "pcie_tx_kibps", t5, rng.integers(1000, 90000, t5.size).astype(float)
        yield p + "pcie_rx_kibps", t5, rng.integers(1000, 90000, t5.size).astype(float)
        t2 = _ticks(seconds, 2, rng)
        b2 = _busy(t2)
        for name, level in (("sm_active_pct", 88), ("sm_occupancy_pct", 41), ("tensor_active_pct", 52),
                            ("dram_active_pct", 37), ("gr_engine_active_pct", 97), ("fp16_active_pct", 12),
                            ("fp32_active_pct", 9), ("int_active_pct", 6)):
            yield p + name, t2, np.round(np.where(b2, level + rng.normal(0, 3, t2.size), rng.uniform(0, 3, t2.size)), 2)
        yield p + "fp64_active_pct", t2, np.zeros(t2.size)
        smi_power = np.interp(t2, t, power)
        temp2 = np.round(np.interp(t2, t10, temp))
        smi = {"power_w": np.round(smi_power, 2),
               "power_instant_w": np.round(smi_power + rng.normal(0, 20, t2.size), 2),
               "util_pct": np.where(b2, 100.0, 3.0),
               "mem_util_pct": np.where(b2, rng.integers(38, 62, t2.size), 1).astype(float),
               "mem_used_mib": np.full(t2.size, 71234.0), "temp_c": temp2, "mem_temp_c": temp2 + 8,
               "sm_clock_mhz": np.interp(t2, t10, clock), "mem_clock_mhz": np.full(t2.size, 2619.0),
               "pstate_level": np.zeros(t2.size), "clocks_idle_bool": np.zeros(t2.size),
               "throttle_power_bool": np.interp(t2, t10, capped).round(), "throttle_thermal_bool": np.zeros(t2.size),
               "throttle_hw_bool": np.zeros(t2.size)}
        for name, values in smi.items():
            yield f"smi_{p}{name}", t2, values
        t5hz = _ticks(seconds, 5, rng)
        yield p + "proc_sm_pct", t5hz, np.where(_busy(t5hz), rng.integers(80, 100, t5hz.size), 0).astype(float)
        yield p + "proc_mem_util_pct", t5hz, np.where(_busy(t5hz), rng.integers(35, 60, t5hz.size), 0).astype(float)
        yield p + "proc_count", t10, np.ones(t10.size)
        yield p + "proc_mem_mib", t10, np.full(t10.size, 70500.0)
    t1 = _ticks(seconds, 1, rng)
    yield "proc_cpu_pct", t1, np.round(100 * gpus * 0.6 + rng.normal(0, 15, t1.size), 1)
    yield "proc_rss_mib", t1, np.round(4000 * gpus + t1 * 0.05 + rng.normal(0, 3, t1.size), 2)
    yield "proc_threads_count", t1, (40 * gpus + rng.integers(0, 3, t1.size)).astype(float)
    yield "proc_count", t1, np.full(t1.size, float(gpus + 1))
    yield "proc_read_mib", t1, np.round(np.cumsum(rng.uniform(0, 20, t1.size)), 2)
    yield "proc_write_mib", t1, np.round(np.cumsum(rng.uniform(0, 0.5, t1.size)), 2)
    yield "host_cpu_pct", t1, np.round(40 + rng.normal(0, 5, t1.size), 1)
    yield "host_mem_used_mib", t1, np.round(100_000 + t1 * 0.1 + rng.normal(0, 20, t1.size), 1)
    yield "host_mem_pct", t1, np.round((100_000 + t1 * 0.1) / 2000, 1)


def points(seconds: float, gpus: int, t0_s: float, seed: int = 1) -> Iterator[tuple[str, float, int, int]]:
    """(system/ name, value, timestamp ms, step) of every reading, metric by metric, in time order."""
    for name, times, values in metrics(seconds, gpus, seed):
        key = "system/" + name
        for t, v in zip(times.tolist(), values.tolist()):
            yield key, v, int((t0_s + t) * 1000), int(t * 1000)
