"""One GPU's cumulative energy counter and its specifications, for measurement windows.

The per-operation profiler reads the counter through a window of repeated work (`read_j()`), checks
the power it gives against the driver's own power samples over the same span (`timeline_w()`), and
asks once for the facts a predictor needs (`facts()`): name, driver, power limit, maximum clocks,
memory bus width and the bandwidth they imply.
"""
from __future__ import annotations

import math
import os
import time
from collections import deque
from typing import Any

from listeners.base import ListenerError
from listeners.nvml_backend import nvml
from listeners.nvml_listener import start_nvml
from listeners.power_samples import PowerSamples

TIMELINE_KEEP_S = 10.0  # drained power samples kept for windows that ended before the drain


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class EnergyCounter:
    """NVML's total-energy counter (millijoules since the driver loaded) of the first visible GPU."""

    def __init__(self, cuda_visible_devices: str | None = None):
        from listeners.devices import resolve

        nv = start_nvml()
        self._open = True
        self._timeline: deque = deque()  # (epoch s, W) drained from the driver's power samples
        self._samples: PowerSamples | None = None
        try:
            visible = resolve(os.environ.get("CUDA_VISIBLE_DEVICES") if cuda_visible_devices is None
                              else cuda_visible_devices)
            if not visible:
                raise ListenerError("no GPU visible (CUDA_VISIBLE_DEVICES is empty)")
            self.device = visible[0]
            self._handle = self.device.parent_handle if self.device.parent_handle is not None else self.device.handle
            try:
                self.read_j()
            except (nv.NVMLError, AttributeError) as exc:
                raise ListenerError(
                    f"GPU {self.device.name} has no energy counter ({exc}); profile time only with --no-energy") from None
            if self.device.is_mig:
                raise ListenerError(
                    f"{self.device.uuid} is a MIG device: the energy counter covers the whole GPU; profile on a whole GPU")
            self._open_timeline()
        except BaseException:
            self.close()
            raise

    def _open_timeline(self) -> None:
        samples = PowerSamples(self._handle)
        try:
            failed = samples.open(nvml(), time.time())
        except Exception:  # a call a replayed trace never recorded
            failed = "unreadable"
        self._samples = None if failed else samples

    def timeline_w(self, start: float, end: float) -> float:
        """Mean of the driver's power samples (about every 20 ms on Hopper) taken between two epoch times,
        a check on the counter's power over the same span; nan where the GPU keeps no sample buffer."""
        if self._samples is None:
            return math.nan
        try:
            self._timeline.extend(self._samples.drain(nvml()))
        except Exception:  # NVMLError, or a call a replayed trace never recorded
            self._samples = None
            return math.nan
        while self._timeline and self._timeline[0][0] < self._timeline[-1][0] - TIMELINE_KEEP_S:
            self._timeline.popleft()
        inside = [w for t, w in self._timeline if start <= t <= end]
        return sum(inside) / len(inside) if inside else math.nan

    def read_j(self) -> float:
        """Joules since the driver loaded. Not a cheap call (4-5 ms of driver CPU on an H100, docs/benchmarks):
        the profiler polls it between chunks of queued work, which keep the GPU busy meanwhile."""
        return nvml().nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1000.0

    def facts(self) -> dict[str, Any]:
        """Name, driver, power limit and clocks as NVML reports them; a fact it lacks is left out."""
        nv = nvml()
        h = self._handle
        out: dict[str, Any] = {"gpu_name": self.device.name}

        def put(key, fn, *args, convert=lambda v: v):
            try:
                out[key] = convert(fn(*args))
            except Exception:  # NVMLError, or a call a replayed trace never recorded
                pass

        put("driver", nv.nvmlSystemGetDriverVersion, convert=_text)
        put("power_limit_w", nv.nvmlDeviceGetPowerManagementLimit, h, convert=lambda mw: int(mw) / 1000)
        put("sm_clock_max_mhz", nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM, convert=int)
        put("mem_clock_max_mhz", nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM, convert=int)
        put("mem_bus_width_bits", nv.nvmlDeviceGetMemoryBusWidth, h, convert=int)
        put("memory_total_mib", nv.nvmlDeviceGetMemoryInfo, h, convert=lambda m: int(m.total) // (1024 * 1024))
        if "mem_clock_max_mhz" in out and "mem_bus_width_bits" in out:  # double data rate
            out["mem_bandwidth_gbs"] = round(out["mem_clock_max_mhz"] * 1e6 * 2 * out["mem_bus_width_bits"] / 8 / 1e9, 1)
        return out

    def state(self) -> dict[str, Any]:
        """What may move a measurement, read now: SM and memory clocks, performance state, temperature,
        power and the active clock-event (throttle) reasons, e.g. `power_cap`; a value NVML lacks is left out."""
        from listeners.nvml import THROTTLE_REASONS

        nv = nvml()
        h = self._handle
        out: dict[str, Any] = {}

        def put(key, fn, *args, convert=lambda v: v):
            try:
                out[key] = convert(fn(*args))
            except Exception:  # NVMLError, or a call a replayed trace never recorded
                pass

        put("sm_clock_mhz", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM, convert=int)
        put("mem_clock_mhz", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM, convert=int)
        put("pstate", nv.nvmlDeviceGetPerformanceState, h, convert=int)
        put("temp_c", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU, convert=int)
        put("power_w", nv.nvmlDeviceGetPowerUsage, h, convert=lambda mw: int(mw) / 1000)
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        if reasons is not None:
            put("throttle", reasons, h, convert=lambda mask: "+".join(
                name for bit, name in THROTTLE_REASONS.items() if int(mask) & bit) or "none")
        return out

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                nvml().nvmlShutdown()
            except Exception:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def unavailable_reason() -> str | None:
    """None when the first visible GPU has an energy counter, else one line why not."""
    try:
        EnergyCounter().close()
    except ListenerError as exc:
        return str(exc)
    except ImportError as exc:
        return f"NVML bindings missing ({exc}); pip install nvidia-ml-py"
    return None


def update_period(seconds: float = 2.0) -> dict[str, float]:
    """How often the counter changes: poll it for `seconds` and report the gaps between changes."""
    import statistics
    import time

    with EnergyCounter() as counter:
        changes, last = [], counter.read_j()
        reads, t_end = 0, time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            value = counter.read_j()
            reads += 1
            if value != last:
                changes.append(time.perf_counter())
                last = value
    gaps = [b - a for a, b in zip(changes, changes[1:])]
    return {"reads": reads, "changes": len(changes),
            "median_gap_ms": round(statistics.median(gaps) * 1e3, 3) if gaps else float("nan"),
            "max_gap_ms": round(max(gaps) * 1e3, 3) if gaps else float("nan")}


if __name__ == "__main__":
    import json
    import sys

    reason = unavailable_reason()
    print(json.dumps({"unavailable": reason} if reason else update_period(float(sys.argv[1]) if len(sys.argv) > 1 else 2.0)))
