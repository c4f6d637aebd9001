"""`gpu_procs` listener: the GPU memory and SM utilization of the workload's own processes.

Under collocation several workloads share one GPU, so device-wide readings cannot say
who used what. This listener keeps only NVML's per-process entries
(nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetProcessUtilization) whose pid is
in the workload's process tree (the target pid and its descendants, found with psutil: listed again at once
when NVML shows a process the last listing does not hold, and every TREE_EVERY_S in case a pid was reused).

Values per visible GPU i: `gpu{i}_proc_count` (workload processes on the GPU; the most at once is the
tag `gpu.{i}.workload_processes_max`, so a run says which of the watched GPUs its job used) and
`gpu{i}_proc_mem_mib` (their GPU memory), every interval; `gpu{i}_proc_sm_pct` and
`gpu{i}_proc_mem_util_pct` from NVML's per-process utilization samples (the driver takes one every
~200 ms on an H100), summed over the workload's processes with the same timestamp. That call costs
milliseconds of driver CPU, so it is made at open (what the driver holds then belongs to no run), at
most once a second and once more at close (the run's last second). A read returns the samples newer
than the last one read (NVML documents one per process a call), and each is logged as its own point
at its own driver timestamp, not at the time of the read. Left out when NVML has no sample of the
workload, or on MIG devices where it is not supported.

On a time-sliced GPU (`Target.time_sliced`: a naive collocation group) the driver names one process per
tick, and which one, tick by tick, is what tells the workloads apart: the listener then samples at least
every TICK_READ_S and reads process utilization at every sample, so it keeps every tick (a reader asking
once a second keeps each process's newest tick of that second and drops the rest). That costs ~2 ms of
driver CPU ten times a second in the monitor, none in the workload.
"""
from __future__ import annotations

import time
from typing import Mapping

from listeners import process_tree as tree
from listeners.base import Reading, Target
from listeners.devices import GpuDevice, resolve
from listeners.nvml_backend import nvml
from listeners.nvml_listener import NvmlListenerBase
from listeners.power_samples import CLOCK_TOLERANCE_S

MIB = 1024 * 1024
# nvmlDeviceGetProcessUtilization costs ~2 ms of driver CPU a call (H100, driver 580; the running-process
# list ~0.01 ms): at most this often, asking for the samples since the last read.
UTIL_EVERY_S = 1.0
# Listing the tree walks /proc (every process of the host). Only processes on the GPU matter here, and one that
# the last listing does not hold makes it list again at once (a new worker counts from its first sample), so
# the periodic listing only catches a pid reused by another process.
TREE_EVERY_S = 10.0
# On a time-sliced GPU: sample (and read process utilization) at least this often, twice per driver tick.
TICK_READ_S = 0.1


def process_tree(pid: int | None, max_age: float = 0.0) -> set[int]:
    """The pid and every descendant still alive (a listing at most `max_age` s old, shared with `top`)."""
    return tree.pids(pid, max_age)


class GpuProcsListener(NvmlListenerBase):
    name = "gpu_procs"
    description = "GPU memory and SM utilization of the workload's own processes (NVML per-process data)"
    default_interval = 0.2

    def __init__(self, target: Target, interval: float | None = None):
        super().__init__(target, interval)
        self.util_every_s = UTIL_EVERY_S  # the least time between two process-utilization reads
        if target.time_sliced:
            self.interval = min(self.interval, TICK_READ_S)
            self.util_every_s = 0.0
        self.devices: list[GpuDevice] = []
        self._last_ts: dict[int, int] = {}  # newest driver timestamp (µs) read per device
        self._no_util: set[int] = set()  # devices where process utilization is not supported
        self._util_read_at = float("-inf")  # time.monotonic() of the last utilization read
        self._offset_s: float | None = None  # added to driver timestamps to get epoch seconds
        self._pids: set[int] = set()  # every process of the workload seen so far (the exited ones' samples count)
        self._tree: set[int] = set()  # the last listing of the workload's tree
        self._listed_at = float("-inf")  # time.monotonic() of that listing
        self._foreign: set[int] = set()  # pids on the GPU that the last listing did not hold: not the workload's
        self._most: dict[int, int] = {}  # device index -> the most workload processes seen on it at once

    def open_devices(self, nv) -> None:
        self.devices = resolve(self.target.cuda_visible_devices)
        now = time.time()
        self._util_read_at = time.monotonic()
        self._list_tree(self._util_read_at)
        for d in self.devices:
            self._utilization(nv, d, set(), f"gpu{d.index}_proc_", now)  # the backlog: newest timestamp, clock

    def _list_tree(self, mono: float, max_age: float = 0.0) -> set[int]:
        self._listed_at = mono
        self._tree = process_tree(self.target.pid, max_age)
        self._pids |= self._tree
        return self._tree

    def sample(self) -> list[Reading]:
        nv = nvml()
        now = time.time()
        mono = time.monotonic()
        if mono - self._listed_at >= TREE_EVERY_S or not self._tree:  # empty: no workload pid yet
            self._foreign.clear()  # the same sample re-learns them, with no listing more
            pids = self._list_tree(mono, 0.5)  # `top`'s listing of this tick, if it made one
        else:
            pids = self._tree
        if not pids:
            return []
        values: dict[str, float] = {}
        util: list[Reading] = []
        # half an interval of slack: at the period's tick despite the monitor's jitter
        util_due = mono - self._util_read_at >= max(self.util_every_s, self.interval) - self.interval / 2
        if util_due:
            self._util_read_at = mono
        for d in self.devices:
            p = f"gpu{d.index}_proc_"
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(d.handle)
            except nv.NVMLError:
                procs = None
            if procs is not None:
                unknown = {int(proc.pid) for proc in procs} - pids - self._foreign
                if unknown and self._listed_at != mono:  # a process started since the last listing?
                    pids = self._list_tree(mono)
                if unknown:
                    self._foreign = (self._foreign | unknown) - pids
                mine = [proc for proc in procs if int(proc.pid) in pids]
                values[p + "count"] = float(len(mine))
                self._most[d.index] = max(self._most.get(d.index, 0), len(mine))
                used = [proc.usedGpuMemory for proc in mine if proc.usedGpuMemory is not None]
                values[p + "mem_mib"] = float(sum(used)) / MIB
            if util_due:
                util.extend(self._utilization(nv, d, self._pids, p, now))
        return ([Reading(now, values)] if values else []) + util

    def tags(self) -> Mapping[str, str]:
        """Which watched GPUs the workload used: `gpu.{i}.workload_processes_max` (0: not used)."""
        return {f"gpu.{i}.workload_processes_max": str(n) for i, n in sorted(self._most.items())}

    def read(self) -> Mapping[str, float]:
        """The newest values of one sample() (utilization samples folded to the latest)."""
        out: dict[str, float] = {}
        for reading in self.sample():
            out.update(reading.values)
        return out

    def closing_sample(self) -> list[Reading]:
        """The utilization samples since the last read, so the run's last second counts too."""
        pids = self._pids | process_tree(self.target.pid)
        if not pids:
            return []
        nv, now = nvml(), time.time()
        out: list[Reading] = []
        for d in self.devices:
            out.extend(self._utilization(nv, d, pids, f"gpu{d.index}_proc_", now))
        return out

    def _utilization(self, nv, d: GpuDevice, pids: set[int], p: str, now: float) -> list[Reading]:
        """One reading per driver timestamp of the workload's samples newer than the last read."""
        if d.index in self._no_util:
            return []
        last = self._last_ts.get(d.index, 0)
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(d.handle, last)
        except (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound, nv.NVMLError_NoPermission):
            self._no_util.add(d.index)
            return []
        except nv.NVMLError:  # NotFound: no new sample since `last`
            return []
        newest = last
        mine: dict[int, list] = {}
        for s in samples:
            ts = int(s.timeStamp)
            if ts <= last:
                continue
            newest = max(newest, ts)
            if int(s.pid) in pids:
                mine.setdefault(ts, []).append(s)
        if newest == last:
            return []
        self._last_ts[d.index] = newest
        if self._offset_s is None:
            # the driver stamps with the CPU's epoch clock; a replayed trace's is shifted once
            self._offset_s = now - newest / 1e6 if abs(now - newest / 1e6) > CLOCK_TOLERANCE_S else 0.0
        return [Reading(ts / 1e6 + self._offset_s,
                        {p + "sm_pct": float(sum(int(s.smUtil) for s in group)),
                         p + "mem_util_pct": float(sum(int(s.memUtil) for s in group))})
                for ts, group in sorted(mine.items())]
