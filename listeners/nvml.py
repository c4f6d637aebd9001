"""`nvml` listener: power, energy, temperatures, clocks, utilization, memory, PCIe and
clock-event (throttle) reasons of every GPU the workload sees, read through pynvml.

Names carry the workload's GPU index (`gpu0_power_w`). For a MIG device the
device-wide readings (power, energy, temperature, clocks, PCIe, throttle) come from its
physical GPU, since NVML reports them only there; memory use is the MIG instance's own.
A reading the GPU does not support is dropped after its first failure.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from listeners.base import Target
from listeners.devices import GpuDevice, describe, resolve
from listeners.nvml_backend import nvml
from listeners.nvml_listener import NvmlListenerBase

# clock-event reason bit → name in `gpu{i}_throttle_<name>_bool` (pynvml nvmlClocksEventReason*)
THROTTLE_REASONS = {
    0x001: "idle",
    0x002: "app_clocks",
    0x004: "power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "thermal_sw",
    0x040: "thermal_hw",
    0x080: "power_brake_hw",
    0x100: "display_clocks",
}

MIB = 1024 * 1024
# nvmlDeviceGetFieldValues ids (pynvml attribute names) → metric name, read in one call
FIELD_IDS = {
    "NVML_FI_DEV_POWER_INSTANT": "power_w",
    "NVML_FI_DEV_POWER_AVERAGE": "power_avg_w",
    "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "energy_j",
    "NVML_FI_DEV_MEMORY_TEMP": "mem_temp_c",
}
# NVML measures PCIe throughput over a ~20 ms window inside each call: read it at most
# this often so power and energy can still be sampled at 20 Hz and faster.
PCIE_EVERY_S = 1.0


def decode_throttle(prefix: str, mask: int) -> dict[str, float]:
    values = {f"{prefix}throttle_{name}_bool": float(bool(mask & bit)) for bit, name in THROTTLE_REASONS.items()}
    values[f"{prefix}throttle_mask_bits"] = float(mask)
    return values


def field_value(nv, field: Any) -> float:
    """One nvmlDeviceGetFieldValues entry as a number; a failed entry raises its NVMLError."""
    if field.nvmlReturn != nv.NVML_SUCCESS:
        raise nv.NVMLError(field.nvmlReturn)
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        int(field.valueType), "uiVal")
    return float(getattr(field.value, attr))


# Errors after which a reading is never asked for again on that GPU.
def _permanent(nv) -> tuple:
    return (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound, nv.NVMLError_NoPermission)


class NvmlListener(NvmlListenerBase):
    name = "nvml"
    description = "GPU power, energy, temperature, clocks, utilization, memory, PCIe, throttle reasons (NVML)"
    default_interval = 0.1

    def __init__(self, target: Target, interval: float | None = None):
        super().__init__(target, interval)
        self.devices: list[GpuDevice] = []
        self._readers: list[tuple[str, Callable[[], Mapping[str, float]]]] = []
        self._energy_start: dict[int, float] = {}
        self._tags: dict[str, str] = {}
        self.dropped: list[str] = []  # readings this GPU does not support, as `gpu{i}_<name>`

    def open_devices(self, nv) -> None:
        self.devices = resolve(self.target.cuda_visible_devices)
        self._tags = describe(self.devices)
        for d in self.devices:
            self._readers.extend(self._device_readers(nv, d))

    def _device_readers(self, nv, d: GpuDevice) -> list[tuple[str, Callable[[], Mapping[str, float]]]]:
        p = f"gpu{d.index}_"
        gpu = d.parent_handle if d.parent_handle is not None else d.handle
        one = lambda name, fn, scale=1.0: (  # noqa: E731
            p + name, lambda: {p + name: float(fn()) * scale})

        def energy():
            mj = float(nv.nvmlDeviceGetTotalEnergyConsumption(gpu))
            start = self._energy_start.setdefault(d.index, mj)
            return {p + "energy_j": (mj - start) / 1000.0}

        def utilization():
            u = nv.nvmlDeviceGetUtilizationRates(d.handle)
            return {p + "util_pct": float(u.gpu), p + "mem_util_pct": float(u.memory)}

        def throttle():
            try:
                mask = nv.nvmlDeviceGetCurrentClocksEventReasons(gpu)
            except (AttributeError, nv.NVMLError_FunctionNotFound):  # drivers before 535
                mask = nv.nvmlDeviceGetCurrentClocksThrottleReasons(gpu)
            return decode_throttle(p, int(mask))

        last_pcie = [float("-inf")]

        def pcie():
            now = time.monotonic()
            if now - last_pcie[0] < PCIE_EVERY_S:
                return {}
            last_pcie[0] = now
            return {
                p + "pcie_tx_kibps": float(nv.nvmlDeviceGetPcieThroughput(gpu, nv.NVML_PCIE_UTIL_TX_BYTES)),
                p + "pcie_rx_kibps": float(nv.nvmlDeviceGetPcieThroughput(gpu, nv.NVML_PCIE_UTIL_RX_BYTES)),
            }

        fields = self._fields_reader(nv, d, gpu, p)
        have = fields.names if fields else set()
        readers = [(p + "fields", fields)] if fields else []
        if "power_w" not in have:  # no instantaneous power field: NVML's averaged reading
            readers.append(one("power_w", lambda: nv.nvmlDeviceGetPowerUsage(gpu), 1e-3))
        if "energy_j" not in have:
            try:
                self._energy_start[d.index] = float(nv.nvmlDeviceGetTotalEnergyConsumption(gpu))
            except nv.NVMLError:
                pass  # no energy counter: the reader fails once and is dropped
            readers.append((p + "energy_j", energy))
        return readers + [
            one("temp_c", lambda: nv.nvmlDeviceGetTemperature(gpu, nv.NVML_TEMPERATURE_GPU)),
            one("sm_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(gpu, nv.NVML_CLOCK_SM)),
            one("mem_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(gpu, nv.NVML_CLOCK_MEM)),
            (p + "util_pct", utilization),
            one("mem_used_mib", lambda: nv.nvmlDeviceGetMemoryInfo(d.handle).used, 1.0 / MIB),
            one("pstate_num", lambda: nv.nvmlDeviceGetPerformanceState(gpu)),
            (p + "pcie", pcie),
            (p + "throttle", throttle),
        ]

    def _fields_reader(self, nv, d: GpuDevice, gpu, p: str):
        """One nvmlDeviceGetFieldValues call for power, average power, energy and memory temperature.

        One driver call instead of four keeps sampling cheap, and the instantaneous power
        field follows load changes that nvmlDeviceGetPowerUsage (a ~1 s average on Hopper)
        lags behind. The same ids are asked every time; fields this GPU did not answer at
        open() are ignored for good (and listed in `dropped`).
        """
        try:
            ids = [getattr(nv, name) for name in FIELD_IDS]
            first = nv.nvmlDeviceGetFieldValues(gpu, ids)
        except (AttributeError, nv.NVMLError):
            return None
        kept: dict[int, str] = {}
        for name, fid, f in zip(FIELD_IDS.values(), ids, first):
            try:
                value = field_value(nv, f)
            except nv.NVMLError:
                if name not in ("power_w", "energy_j"):  # those two fall back to their own calls
                    self.dropped.append(p + name)
                continue
            kept[fid] = name
            if name == "energy_j":
                self._energy_start[d.index] = value
        if not kept:
            return None

        def read():
            out = {}
            for f in nv.nvmlDeviceGetFieldValues(gpu, ids):
                name = kept.get(int(f.fieldId))
                if name is None:
                    continue
                try:
                    value = field_value(nv, f)
                except nv.NVMLError:
                    continue  # this entry failed this time; the others still count
                if name == "energy_j":
                    out[p + name] = (value - self._energy_start.setdefault(d.index, value)) / 1000.0
                elif name.endswith("_w"):
                    out[p + name] = value / 1000.0  # NVML reports mW
                else:
                    out[p + name] = value
            return out

        read.names = set(kept.values())
        return read

    def read(self) -> Mapping[str, float]:
        nv = nvml()
        permanent = _permanent(nv)
        values: dict[str, float] = {}
        dropped = []
        for i, (name, reader) in enumerate(self._readers):
            try:
                values.update(reader())
            except permanent:
                dropped.append(i)
                self.dropped.append(name)
            except nv.NVMLError:
                pass  # a passing failure (timeout, busy): skip this reading this time
        for i in reversed(dropped):
            del self._readers[i]
        return values

    def tags(self) -> Mapping[str, str]:
        return dict(self._tags)
