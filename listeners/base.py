"""The listener contract: every hardware source is a small class with this shape.

A listener knows hardware and nothing of MLflow. The monitor calls, from one
thread per listener:

    reason = cls.probe(target)     # None when usable here, else one line why not
    listener = cls(target, interval)
    listener.open()
    while running: readings = listener.sample(); sleep(interval)
    readings = listener.sample(); readings += listener.closing_sample()
    listener.close()

`sample()` returns a list of `Reading`s. Each reading carries the wall-clock time
(seconds since the epoch) at which its values were read, so a streaming source
(nvidia-smi, dcgmi, perf) can hand back several lines with their own times.

Value names follow one scheme (see README "Metric names"): lower-case words
joined by `_`, the GPU or CPU index in the name (`gpu0_power_w`), the unit as the
last word (`_w`, `_j`, `_c`, `_mhz`, `_pct`, `_mib`, `_kibps`, `_count`,
`_bool`, ...). The MLflow side adds the `system/` prefix.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import ClassVar, Mapping


class ListenerError(Exception):
    """A listener could not open or read its source; the message is one line for users."""


@dataclass
class Reading:
    time: float  # seconds since the epoch, taken when the values were read
    values: Mapping[str, float]


@dataclass
class Target:
    """What the listeners watch: the workload's root process and the GPUs it sees.

    `pid` may be None until the workload is spawned; listeners that need it read
    it at `open()`/`sample()` time. `cuda_visible_devices` is the workload's
    CUDA_VISIBLE_DEVICES (None: every GPU). `time_sliced`: other workloads share its GPUs by
    time-slicing (no MPS, no MIG).
    """

    pid: int | None = None
    cuda_visible_devices: str | None = field(
        default_factory=lambda: os.environ.get("CUDA_VISIBLE_DEVICES")
    )
    # the workload shares its GPU by time-slicing with others (a naive collocation group): per-process
    # listeners read what tells them apart at the driver's own rate
    time_sliced: bool = False


class Listener:
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    default_interval: ClassVar[float] = 1.0
    # The shortest interval a global `--interval` sets for a listener whose every sample costs
    # milliseconds of driver CPU; only the listener's own interval (`--listeners gpm:0.1`) goes below.
    min_interval: ClassVar[float] = 0.0

    def __init__(self, target: Target, interval: float | None = None):
        self.target = target
        self.interval = float(interval if interval is not None else self.default_interval)

    @classmethod
    def probe(cls, target: Target) -> str | None:
        """None when this listener can run here, else one line saying why not."""
        return None

    def open(self) -> None:
        pass

    def read(self) -> Mapping[str, float]:
        """Simple listeners implement this; `sample()` stamps it with the time."""
        raise NotImplementedError

    def sample(self) -> list[Reading]:
        now = time.time()
        values = self.read()
        return [Reading(now, values)] if values else []

    def closing_sample(self) -> list[Reading]:
        """Readings taken once more right before close(), even just after a sample: a counter read
        only now and then (the NVML energy counter) reads here, so the run's total is exact."""
        return []

    def close(self) -> None:
        pass

    def tags(self) -> Mapping[str, str]:
        """Static facts this listener learned (device names, UUIDs); logged once as run tags."""
        return {}
