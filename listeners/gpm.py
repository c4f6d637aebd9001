"""`gpm` listener: GPU Performance Monitoring counters (Hopper and newer) through pynvml.

GPM metrics are rates between two samples, so each GPU (or MIG GPU instance) keeps two
sample buffers: every `sample()` fills one and asks NVML for the metrics between it and
the previous one. Each value is the exact average over the interval, so a longer interval loses
time resolution, not accuracy. Names: `gpu{i}_sm_active_pct` for a whole GPU, `gpu{i}_mig{gi}_sm_active_pct`
for GPU instance `gi` (a MIG device the workload sees, or each instance of a MIG-mode GPU).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from listeners.base import ListenerError, Target
from listeners.devices import GpuDevice, resolve, unavailable_reason
from listeners.nvml_backend import nvml
from listeners.nvml_listener import NvmlListenerBase

# NVML_GPM_METRIC_* name → metric-name suffix
METRICS = {
    "NVML_GPM_METRIC_GRAPHICS_UTIL": "gr_engine_active_pct",
    "NVML_GPM_METRIC_SM_UTIL": "sm_active_pct",
    "NVML_GPM_METRIC_SM_OCCUPANCY": "sm_occupancy_pct",
    "NVML_GPM_METRIC_ANY_TENSOR_UTIL": "tensor_active_pct",
    "NVML_GPM_METRIC_DRAM_BW_UTIL": "dram_active_pct",
    "NVML_GPM_METRIC_FP16_UTIL": "fp16_active_pct",
    "NVML_GPM_METRIC_FP32_UTIL": "fp32_active_pct",
    "NVML_GPM_METRIC_FP64_UTIL": "fp64_active_pct",
    "NVML_GPM_METRIC_INTEGER_UTIL": "int_active_pct",
}


@dataclass
class _Source:
    prefix: str  # "gpu0_" or "gpu0_mig3_"
    handle: Any  # the physical GPU
    gpu_instance_id: int | None
    prev: Any  # the sample taken last time
    cur: Any  # the buffer the next sample goes into
    request: Any = None  # the nvmlGpmMetricsGet request, built once and asked again with the two samples
    names: dict[int, str] | None = None  # metric id -> this source's metric name

    def take(self, nv, sample) -> None:
        if self.gpu_instance_id is None:
            nv.nvmlGpmSampleGet(self.handle, sample)
        else:
            nv.nvmlGpmMigSampleGet(self.handle, self.gpu_instance_id, sample)


def gpm_support_reason(nv, device: GpuDevice) -> str | None:
    """None when GPM works on this device, else one line why not."""
    handle = device.parent_handle if device.parent_handle is not None else device.handle
    try:
        support = nv.nvmlGpmQueryDeviceSupport(handle)
    except (AttributeError, nv.NVMLError_FunctionNotFound):
        return "GPM needs NVIDIA driver R520 or newer; this driver has no nvmlGpmQueryDeviceSupport"
    except nv.NVMLError as exc:
        return f"GPM support query failed on GPU {device.index} ({device.name}): {exc}"
    if not support.isSupportedDevice:
        return f"GPM is not supported on GPU {device.index} ({device.name}); it needs Hopper (H100) or newer"
    return None


class GpmListener(NvmlListenerBase):
    name = "gpm"
    description = "SM, tensor, DRAM and FP pipe activity per GPU and MIG instance (NVML GPM, Hopper+)"
    default_interval = 0.5
    # nvmlGpmMetricsGet costs ~1.7 ms of driver CPU a call however many metrics it asks for (H100,
    # docs/benchmarks): at most twice a second unless asked for explicitly (`gpm:0.1`)
    min_interval = 0.5

    def __init__(self, target: Target, interval: float | None = None):
        super().__init__(target, interval)
        self._sources: list[_Source] = []
        self._metric_ids: dict[int, str] = {}
        self.skipped: list[str] = []  # one line per visible GPU that GPM cannot watch

    @classmethod
    def probe(cls, target: Target) -> str | None:
        reason = unavailable_reason(target.cuda_visible_devices)
        if reason:
            return reason
        nv = nvml()
        nv.nvmlInit()
        try:
            reasons = [gpm_support_reason(nv, d) for d in resolve(target.cuda_visible_devices)]
        finally:
            nv.nvmlShutdown()
        if all(reasons):
            return reasons[0]
        return None

    def open_devices(self, nv) -> None:
        self._metric_ids = {int(getattr(nv, const)): suffix for const, suffix in METRICS.items()}
        for d in resolve(self.target.cuda_visible_devices):
            reason = gpm_support_reason(nv, d)
            if reason:
                self.skipped.append(reason)
                continue
            handle = d.parent_handle if d.parent_handle is not None else d.handle
            if d.is_mig:
                instances = [d.gpu_instance_id]
            elif d.mig_enabled:
                instances = [m.gpu_instance_id for m in d.mig_instances]
            else:
                instances = [None]
            for gi in instances:
                prefix = f"gpu{d.index}_" if gi is None else f"gpu{d.index}_mig{gi}_"
                source = _Source(prefix, handle, gi, nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc(),
                                 nv.c_nvmlGpmMetricsGet_t(),
                                 {mid: prefix + suffix for mid, suffix in self._metric_ids.items()})
                source.request.version = nv.NVML_GPM_METRICS_GET_VERSION
                source.request.numMetrics = len(self._metric_ids)
                self._sources.append(source)  # before take(): close() frees its buffers
                source.take(nv, source.prev)
        if not self._sources:
            raise ListenerError(self.skipped[0] if self.skipped else "no GPU to watch with GPM")

    def read(self) -> Mapping[str, float]:
        nv = nvml()
        values: dict[str, float] = {}
        for source in self._sources:
            try:
                source.take(nv, source.cur)
            except nv.NVMLError:
                continue  # try again next time, still against the older sample
            request = source.request
            request.sample1 = source.prev
            request.sample2 = source.cur
            for j, metric_id in enumerate(self._metric_ids):  # inputs: set again, whatever the last call left
                request.metrics[j].metricId = metric_id
            source.prev, source.cur = source.cur, source.prev
            try:
                result = nv.nvmlGpmMetricsGet(request)
            except nv.NVMLError:
                continue
            names = source.names
            for j in range(len(self._metric_ids)):
                metric = result.metrics[j]
                name = names.get(int(metric.metricId))
                # the first interval can read NaN (seen for DRAM on an H200): no reading, not a value
                if name and metric.nvmlReturn == nv.NVML_SUCCESS and math.isfinite(metric.value):
                    values[name] = float(metric.value)
        return values

    def close(self) -> None:
        nv = nvml()
        for source in self._sources:
            for sample in (source.prev, source.cur):
                try:
                    nv.nvmlGpmSampleFree(sample)
                except nv.NVMLError:
                    pass
        self._sources = []
        super().close()
