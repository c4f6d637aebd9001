"""`nvml` listener: power, energy, temperatures, clocks, utilization, memory, PCIe and
clock-event (throttle) reasons of every GPU the workload sees, read through pynvml.

Each reading is taken at a rate that fits its cost (CPU in the driver per call, measured in
docs/benchmarks): power comes from the driver's own sample buffer (about 50 samples a second,
each logged as its own point at its own time), drained about once a second in one call; the
energy counter (~5 ms a call) is read at open, at close and every ENERGY_EVERY_S in between, and
the power samples between two reads, rescaled to the counter's rise, give the energy's course at
about four points a second (energy_timeline.py); everything else (µs a call) every interval. Where
the sample buffer cannot be read, power is read point by point every interval and the tag
`gpu.{i}.power_source` says why.

Names carry the workload's GPU index (`gpu0_power_w`). For a MIG device the
device-wide readings (power, energy, temperature, clocks, PCIe, throttle) come from its
physical GPU, since NVML reports them only there; memory use is the MIG instance's own.
A reading the GPU does not support is dropped after its first failure.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from listeners.base import Reading, Target
from listeners.devices import GpuDevice, describe, resolve
from listeners.energy_timeline import EnergyTimeline
from listeners.nvml_backend import nvml
from listeners.nvml_listener import NvmlListenerBase
from listeners.power_samples import PowerSamples

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
# nvmlDeviceGetFieldValues ids (pynvml attribute names) → metric name, read in one call. The energy
# field is not among them: reading the energy counter costs ~5 ms of driver CPU (H100, driver 580),
# the other readings a few µs (docs/benchmarks).
FIELD_IDS = {
    "NVML_FI_DEV_POWER_INSTANT": "power_w",
    "NVML_FI_DEV_POWER_AVERAGE": "power_avg_w",
    "NVML_FI_DEV_MEMORY_TEMP": "mem_temp_c",
}
# Each reading at a rate that fits its cost: the energy counter (~5 ms of CPU a read) at open, at close
# and at most this often in between; where the driver's power samples are read, `gpu{i}_energy_j` gets
# about four points a second between reads, the samples' integral rescaled to meet the counter at each
# read (energy_timeline.py), logged when the read that closes them is taken;
ENERGY_EVERY_S = 30.0
# NVML measures PCIe throughput over a ~20 ms window inside each call, ~0.8 ms of it CPU (H100): at most
# this often.
PCIE_EVERY_S = 5.0


@functools.lru_cache(maxsize=None)
def _throttle_names(prefix: str) -> tuple[tuple[tuple[int, str], ...], str]:
    """The metric names for one GPU's prefix, built once, not at every sample."""
    return (tuple((bit, f"{prefix}throttle_{name}_bool") for bit, name in THROTTLE_REASONS.items()),
            f"{prefix}throttle_mask_bits")


def decode_throttle(prefix: str, mask: int) -> dict[str, float]:
    bits, mask_name = _throttle_names(prefix)
    values = {name: 1.0 if mask & bit else 0.0 for bit, name in bits}
    values[mask_name] = float(mask)
    return values


def field_value(nv, field: Any) -> float:
    """One nvmlDeviceGetFieldValues entry as a number; a failed entry raises its NVMLError."""
    if field.nvmlReturn != nv.NVML_SUCCESS:
        raise nv.NVMLError(field.nvmlReturn)
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        int(field.valueType), "uiVal")
    return float(getattr(field.value, attr))


def energy_mj(nv, gpu) -> float:
    """The energy counter (mJ since the driver loaded): its field, else nvmlDeviceGetTotalEnergyConsumption."""
    try:
        return field_value(nv, nv.nvmlDeviceGetFieldValues(gpu, [nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION])[0])
    except (AttributeError, nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound):
        return float(nv.nvmlDeviceGetTotalEnergyConsumption(gpu))


# Errors after which a reading is never asked for again on that GPU.
def _permanent(nv) -> tuple:
    return (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound, nv.NVMLError_NoPermission)


@dataclass
class _Reader:
    """One reading of one GPU and how often it is taken (`every_s`; 0: every sample).

    `read(out)` puts its values into `out`: one dict a sample, not one per reading (a sample's
    Python after the thread's sleep costs about as much as its driver calls)."""

    name: str
    read: Callable[[dict], None]
    every_s: float = 0.0
    last: float = float("-inf")  # time.monotonic() of the last read


class NvmlListener(NvmlListenerBase):
    name = "nvml"
    description = "GPU power (50 Hz driver samples), energy, temperature, clocks, utilization, memory, PCIe, throttle reasons (NVML)"
    default_interval = 0.1

    def __init__(self, target: Target, interval: float | None = None):
        super().__init__(target, interval)
        self.requested_interval = self.interval
        self.devices: list[GpuDevice] = []
        self._readers: list[_Reader] = []
        self._permanent: tuple = ()  # the NVML errors after which a reading is dropped for good
        self._power: dict[int, tuple[str, PowerSamples, _Reader]] = {}  # index → (prefix, buffer, its reader)
        self._energy: dict[int, tuple[str, Any, float]] = {}  # index → (prefix, handle, counter at open in mJ)
        self._timelines: dict[int, EnergyTimeline] = {}  # index → energy between counter reads, from power samples
        self._pending: list[Reading] = []  # readings with their own times (energy), handed out by the next sample
        self._tags: dict[str, str] = {}
        self.dropped: list[str] = []  # readings this GPU does not support, as `gpu{i}_<name>`

    def open_devices(self, nv) -> None:
        self._permanent = _permanent(nv)
        self.devices = resolve(self.target.cuda_visible_devices)
        self._tags = describe(self.devices)
        for d in self.devices:
            self._readers.extend(self._device_readers(nv, d))
        # the monitor calls sample() every `interval`: often enough for the buffers' drain rate too;
        # the cheap readings (every_s 0: each sample) then keep the requested interval
        drains = [r.every_s for _, _, r in self._power.values()]
        self.interval = min([self.requested_interval, *drains])
        if self.interval < self.requested_interval:
            for reader in self._readers:
                reader.every_s = reader.every_s or self.requested_interval

    def _device_readers(self, nv, d: GpuDevice) -> list[_Reader]:
        p = f"gpu{d.index}_"
        gpu = d.parent_handle if d.parent_handle is not None else d.handle
        every = self.requested_interval
        slow = lambda period: max(period, every)  # noqa: E731

        def one(name: str, fn, *args, scale: float = 1.0) -> _Reader:
            key = p + name

            def read(out: dict) -> None:
                out[key] = float(fn(*args)) * scale
            return _Reader(key, read)

        readers: list[_Reader] = []

        buffer = PowerSamples(gpu)
        reason = buffer.open(nv, time.time())
        if reason is None:
            drain = _Reader(p + "power_w", lambda out: None, buffer.drain_every_s)
            drain.last = time.monotonic()
            self._power[d.index] = (p, buffer, drain)
            self._tags[f"gpu.{d.index}.power_source"] = (
                f"driver power samples (nvmlDeviceGetSamples), drained every {buffer.drain_every_s:g} s; "
                f"{buffer.backlog} samples over {buffer.backlog_span_s:.2f} s in the buffer at open")
        fields = self._fields_reader(nv, gpu, p, want_power=reason is not None)
        if fields:
            readers.append(_Reader(p + "fields", fields))
        if reason is not None:
            if fields and "power_w" in fields.names:
                source = "instantaneous power field (nvmlDeviceGetFieldValues)"
            else:  # no instantaneous power field: NVML's averaged reading
                readers.append(one("power_w", nv.nvmlDeviceGetPowerUsage, gpu, scale=1e-3))
                source = "averaged power (nvmlDeviceGetPowerUsage)"
            self._tags[f"gpu.{d.index}.power_source"] = f"point reads every {every:g} s, {source}: {reason}"

        try:
            now = time.time()
            self._energy[d.index] = (p, gpu, energy_mj(nv, gpu))
            self._pending.append(Reading(now, {p + "energy_j": 0.0}))
            if d.index in self._power:
                self._timelines[d.index] = EnergyTimeline(now)
            energy = _Reader(p + "energy_j", lambda out: self._read_energy(nv, d.index), slow(ENERGY_EVERY_S))
            energy.last = time.monotonic()
            readers.append(energy)
        except nv.NVMLError:
            self.dropped.append(p + "energy_j")

        util_key, mem_util_key = p + "util_pct", p + "mem_util_pct"

        def utilization(out: dict) -> None:
            u = nv.nvmlDeviceGetUtilizationRates(d.handle)
            out[util_key], out[mem_util_key] = float(u.gpu), float(u.memory)

        old_reasons = nv.nvmlDeviceGetCurrentClocksThrottleReasons  # drivers before 535
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", old_reasons)
        seen: list = [None, {}]  # the last mask and its decoded values: the mask seldom changes

        def throttle(out: dict) -> None:
            nonlocal reasons
            try:
                mask = reasons(gpu)
            except nv.NVMLError_FunctionNotFound:
                if reasons is old_reasons:
                    raise
                reasons = old_reasons
                mask = reasons(gpu)
            if mask != seen[0]:
                seen[:] = [mask, decode_throttle(p, int(mask))]
            out.update(seen[1])

        def memory(out: dict) -> None:
            out[p + "mem_used_mib"] = nv.nvmlDeviceGetMemoryInfo(d.handle).used / MIB

        def pcie(out: dict) -> None:
            out[p + "pcie_tx_kibps"] = float(nv.nvmlDeviceGetPcieThroughput(gpu, nv.NVML_PCIE_UTIL_TX_BYTES))
            out[p + "pcie_rx_kibps"] = float(nv.nvmlDeviceGetPcieThroughput(gpu, nv.NVML_PCIE_UTIL_RX_BYTES))

        return readers + [
            one("temp_c", nv.nvmlDeviceGetTemperature, gpu, nv.NVML_TEMPERATURE_GPU),
            one("sm_clock_mhz", nv.nvmlDeviceGetClockInfo, gpu, nv.NVML_CLOCK_SM),
            one("mem_clock_mhz", nv.nvmlDeviceGetClockInfo, gpu, nv.NVML_CLOCK_MEM),
            _Reader(util_key, utilization),
            _Reader(p + "mem_used_mib", memory),
            one("pstate_num", nv.nvmlDeviceGetPerformanceState, gpu),
            _Reader(p + "pcie", pcie, slow(PCIE_EVERY_S)),
            _Reader(p + "throttle", throttle),
        ]

    def _read_energy(self, nv, index: int, drain: bool = True) -> None:
        """The counter into `_pending`: with power samples, after draining them (unless just drained),
        the points of the segment this read closes; without, the read alone."""
        p, gpu, start = self._energy[index]
        timeline = self._timelines.get(index)
        if drain and timeline is not None and index in self._power:
            self._pending += self._drain_one(nv, index)  # the samples up to now belong to this read
        now = time.time()
        joules = (energy_mj(nv, gpu) - start) / 1000.0
        key = p + "energy_j"
        points = timeline.counter(now, joules) if timeline is not None else [(now, joules)]
        self._pending.extend(Reading(t, {key: e}) for t, e in points)

    def _fields_reader(self, nv, gpu, p: str, want_power: bool):
        """One nvmlDeviceGetFieldValues call for average power, memory temperature and, when the
        driver's power samples cannot be read, instantaneous power.

        The instantaneous power field follows load changes that nvmlDeviceGetPowerUsage (a ~1 s
        average on Hopper) lags behind. The same ids are asked every time; fields this GPU did not
        answer at open() are ignored for good (and listed in `dropped`).
        """
        wanted = {k: v for k, v in FIELD_IDS.items() if want_power or v != "power_w"}
        try:
            ids = [getattr(nv, name) for name in wanted]
            first = nv.nvmlDeviceGetFieldValues(gpu, ids)
        except (AttributeError, nv.NVMLError):
            return None
        kept: dict[int, str] = {}
        for name, fid, f in zip(wanted.values(), ids, first):
            try:
                field_value(nv, f)
            except nv.NVMLError:
                if name != "power_w":  # that one falls back to its own call
                    self.dropped.append(p + name)
                continue
            kept[fid] = name
        if not kept:
            return None

        def read(out: dict) -> None:
            for f in nv.nvmlDeviceGetFieldValues(gpu, ids):
                name = kept.get(int(f.fieldId))
                if name is None:
                    continue
                try:
                    value = field_value(nv, f)
                except nv.NVMLError:
                    continue  # this entry failed this time; the others still count
                out[p + name] = value / 1000.0 if name.endswith("_w") else value  # NVML reports mW

        read.names = set(kept.values())
        return read

    def sample(self) -> list[Reading]:
        now = time.time()
        values = self._read_due(time.monotonic())
        readings, self._pending = self._pending, []
        if values:
            readings.append(Reading(now, values))
        return readings + self._drain(time.monotonic())

    def read(self) -> Mapping[str, float]:
        return self._read_due(time.monotonic())

    def closing_sample(self) -> list[Reading]:
        """The counter once more (the summary's exact joules) and the power samples not yet drained."""
        nv = nvml()
        drained = self._drain(float("inf"))  # first: the counter read after them closes their segment
        for index in list(self._energy):
            try:
                self._read_energy(nv, index, drain=False)
            except nv.NVMLError:
                pass
        readings, self._pending = self._pending, []
        return readings + drained

    def _due(self, reader: _Reader, now: float) -> bool:
        # half a tick of slack: a reader as slow as the tick is taken every tick despite jitter
        return not reader.every_s or now - reader.last >= reader.every_s - self.interval / 2

    def _read_due(self, now: float) -> dict[str, float]:
        values: dict[str, float] = {}
        dropped = None
        for reader in self._readers:
            if reader.every_s and not self._due(reader, now):  # those read every sample skip the call
                continue
            reader.last = now
            try:
                reader.read(values)
            except self._permanent:
                dropped = dropped or []
                dropped.append(reader)
                self.dropped.append(reader.name)
            except nvml().NVMLError:
                pass  # a passing failure (timeout, busy): skip this reading this time
        if dropped:
            self._readers = [r for r in self._readers if r not in dropped]
            # a counter that cannot be read any more closes no segment: its samples are not kept
            self._timelines = {i: tl for i, tl in self._timelines.items() if f"gpu{i}_energy_j" not in self.dropped}
        return values

    def _drain(self, now: float) -> list[Reading]:
        """Each new driver power sample as its own reading, at its own time."""
        nv = nvml()
        readings = []
        for index, (_, _, reader) in list(self._power.items()):
            if self._due(reader, now):
                readings += self._drain_one(nv, index)
        return readings

    def _drain_one(self, nv, index: int) -> list[Reading]:
        p, buffer, reader = self._power[index]
        reader.last = time.monotonic()
        try:
            samples = buffer.drain(nv)
        except _permanent(nv):
            del self._power[index]
            self.dropped.append(reader.name)
            return []
        except nv.NVMLError:
            return []
        timeline = self._timelines.get(index)
        if timeline is not None:
            timeline.power(samples)
        return [Reading(t, {p + "power_w": watts}) for t, watts in samples]

    def tags(self) -> Mapping[str, str]:
        tags = dict(self._tags)
        for index, (_, buffer, _) in self._power.items():
            if buffer.missed_s:  # drained too late: the timeline has gaps that the integral bridges
                tags[f"gpu.{index}.power_samples_missed_s"] = f"{buffer.missed_s:.2f}"
        return tags
