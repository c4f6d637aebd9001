"""`gpu_procs` listener: the GPU memory and SM utilization of the workload's own processes.

Under collocation several workloads share one GPU, so device-wide readings cannot say
who used what. This listener keeps only NVML's per-process entries
(nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetProcessUtilization) whose pid is
in the workload's process tree (the target pid and its descendants, found with psutil).

Values per visible GPU i: `gpu{i}_proc_count` (workload processes on the GPU),
`gpu{i}_proc_mem_mib` (their GPU memory), `gpu{i}_proc_sm_pct` and
`gpu{i}_proc_mem_util_pct` (summed over the processes' newest utilization samples, read at
most once a second since each read costs milliseconds of driver CPU; left out when NVML has no
new sample, or on MIG devices where it is not supported).
"""
from __future__ import annotations

import time
from typing import Mapping

import psutil

from listeners.base import Target
from listeners.devices import GpuDevice, resolve
from listeners.nvml_backend import nvml
from listeners.nvml_listener import NvmlListenerBase

MIB = 1024 * 1024
# nvmlDeviceGetProcessUtilization costs ~2 ms of driver CPU a call (H100, driver 580; the running-process
# list ~0.01 ms): at most this often, asking for every sample since the last read.
UTIL_EVERY_S = 1.0


def process_tree(pid: int | None) -> set[int]:
    """The pid and every descendant still alive; just {pid} when psutil cannot see it."""
    if pid is None:
        return set()
    try:
        return {pid} | {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return {pid}


class GpuProcsListener(NvmlListenerBase):
    name = "gpu_procs"
    description = "GPU memory and SM utilization of the workload's own processes (NVML per-process data)"
    default_interval = 0.2

    def __init__(self, target: Target, interval: float | None = None):
        super().__init__(target, interval)
        self.devices: list[GpuDevice] = []
        self._last_ts: dict[int, int] = {}
        self._no_util: set[int] = set()  # devices where process utilization is not supported
        self._util_read_at = float("-inf")  # time.monotonic() of the last utilization read

    def open_devices(self, nv) -> None:
        self.devices = resolve(self.target.cuda_visible_devices)

    def read(self) -> Mapping[str, float]:
        nv = nvml()
        pids = process_tree(self.target.pid)
        if not pids:
            return {}
        values: dict[str, float] = {}
        now = time.monotonic()
        # half an interval of slack: at the period's tick despite the monitor's jitter
        util_due = now - self._util_read_at >= max(UTIL_EVERY_S, self.interval) - self.interval / 2
        if util_due:
            self._util_read_at = now
        for d in self.devices:
            p = f"gpu{d.index}_proc_"
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(d.handle)
            except nv.NVMLError:
                procs = None
            if procs is not None:
                mine = [proc for proc in procs if int(proc.pid) in pids]
                values[p + "count"] = float(len(mine))
                used = [proc.usedGpuMemory for proc in mine if proc.usedGpuMemory is not None]
                values[p + "mem_mib"] = float(sum(used)) / MIB
            if util_due:
                values.update(self._utilization(nv, d, pids, p))
        return values

    def _utilization(self, nv, d: GpuDevice, pids: set[int], p: str) -> dict[str, float]:
        if d.index in self._no_util:
            return {}
        last = self._last_ts.get(d.index, 0)
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(d.handle, last)
        except (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound, nv.NVMLError_NoPermission):
            self._no_util.add(d.index)
            return {}
        except nv.NVMLError:  # NotFound: no new sample since `last`
            return {}
        newest: dict[int, object] = {}
        for s in samples:
            ts = int(s.timeStamp)
            if ts <= last:
                continue
            self._last_ts[d.index] = max(self._last_ts.get(d.index, 0), ts)
            pid = int(s.pid)
            if pid in pids and (pid not in newest or int(newest[pid].timeStamp) < ts):
                newest[pid] = s
        if not newest:
            return {}
        return {p + "sm_pct": float(sum(int(s.smUtil) for s in newest.values())),
                p + "mem_util_pct": float(sum(int(s.memUtil) for s in newest.values()))}

