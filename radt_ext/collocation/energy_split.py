"""A group's GPU energy split among its workloads, at the end of the group: the inputs from what
the parent's and the children's listeners logged, the results on the runs.

Per GPU of the group: the parent's `gpu{i}_power_w` and `gpu{i}_energy_j`, and each workload's
activity on it from its child's own listeners — `gpu0_proc_sm_pct` (gpu_procs), or under MIG its
instance's GPM `gpu0_mig{gi}_sm_active_pct` scaled by the instance's share of the GPU — and, where the
workload reported progress, the first and last of its marks (`Child.window`: the edges of its own work,
which NVML's one-process-a-tick samples place only to a tick or two), its progress records
(`Child.progress`: its cumulative samples, whose rate over its rate alone weighs it on a time-sliced or MPS
GPU) and its command (`Child.kind`: jobs of one command run at one rate alone). The split itself is
`attribution.attribute` (see there for idle power and missing samples, and `time_slicing` for a
time-sliced GPU). Each child gets its share and the interval the samples allow
(`gpu_energy_attributed_low_j` / `_high_j`).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from radt_ext.collocation.modes import CPU, metric_name

if TYPE_CHECKING:
    from radt_ext.collocation.attribution import Attribution

PARENT_SERIES = re.compile(r"^gpu\d+_(power_w|energy_j)$")
CHILD_SERIES = re.compile(r"^gpu\d+_(proc_sm_pct)$|^gpu0_mig\d+_sm_active_pct$")
_MIG_SM = re.compile(r"^gpu0_mig\d+_sm_active_pct$")
_SLICES = re.compile(r"^(\d+)g\.")
FULL_GPU_SLICES = 7  # compute slices of a whole GPU (A100/H100/H200 MIG)
TIMELINE_BIN_S = 0.2  # the attributed power timeline's resolution (per-process samples come ~5 Hz)
ATTRIBUTED_POWER = "gpu0_power_attributed_w"  # a child sees its (first) GPU as gpu0


@dataclass
class Child:
    name: str
    device: str  # the group's device value ("0", GPU-<uuid>; "0,1": a workload on both)
    start: float
    end: float | None
    series: dict[str, list[tuple[float, float]]]
    mig: str | None = None  # a MIG profile such as "3g.71gb"
    window: tuple[float, float] | None = None  # its first and last progress mark, where it reported progress
    progress: list[tuple[float, float]] | None = None  # (t, cumulative samples) at its progress records
    kind: str = ""  # its command: workloads of one kind run at the same rate alone


def activity(child: Child, position: int = 0) -> tuple[list[tuple[float, float]], float, bool]:
    """(SM activity samples, scale, per-process?) on the child's `position`-th GPU: per-process SM %
    where logged, else the MIG instance's GPM SM active %."""
    procs = child.series.get(f"gpu{position}_proc_sm_pct")
    if procs:
        return procs, 1.0, True
    for name, points in child.series.items():
        if _MIG_SM.match(name) and points:
            m = _SLICES.match(child.mig or "")
            return points, (int(m.group(1)) / FULL_GPU_SLICES if m else 1.0), False
    return [], 1.0, True


def split(devices: list[str], parent_series: dict[str, list[tuple[float, float]]],
          children: list[Child]) -> dict[int, Attribution]:
    """{parent GPU index: attribution} for every GPU with power or energy logged."""
    from radt_ext.collocation.attribution import WorkloadActivity, attribute  # a group's end only

    out = {}
    for i, device in enumerate(devices):
        power, energy = parent_series.get(f"gpu{i}_power_w", []), parent_series.get(f"gpu{i}_energy_j", [])
        if device == CPU or (len(power) < 2 and len(energy) < 2):
            continue
        work, per_process = [], True
        for c in children:
            mine = [d.strip() for d in c.device.split(",")]
            if device in mine and c.start:
                points, scale, procs = activity(c, mine.index(device))
                work.append(WorkloadActivity(c.name, c.start, c.end, points, scale, window=c.window,
                                             progress=c.progress, kind=c.kind))
                per_process = per_process and procs
        if work:
            split_i = attribute(power, work, energy, one_per_tick=per_process)
            before = energy[0][1] if energy else 0.0
            if before > 0:  # the counter counts from the listener's start: its first value came before any sample
                split_i.unattributed_j += before
                split_i.total_j += before
            out[i] = split_i
    return out


def child_metrics(name: str, parts: dict[int, Attribution], samples: float, t0: float) -> list:
    """A child's attributed energy (summed over its GPUs) and its attributed power timeline."""
    from mlflow.entities import Metric

    from radt_ext.collocation.attribution import binned

    mine = [a.shares[name] for a in parts.values() if name in a.shares]
    if not mine:
        return []
    now_ms = int(time.time() * 1000)
    energy = sum(s.energy_j for s in mine)
    values = {"gpu_energy_attributed_j": energy, "gpu_energy_active_attributed_j": sum(s.active_j for s in mine),
              "gpu_energy_idle_attributed_j": sum(s.idle_j for s in mine),
              "gpu_energy_attributed_low_j": sum(s.low_j for s in mine),
              "gpu_energy_attributed_high_j": sum(s.high_j for s in mine)}
    if samples > 0:
        values["energy_per_sample_attributed_j"] = energy / samples
    metrics = [Metric(f"summary/{k}", float(v), now_ms, 0) for k, v in values.items()]
    for k, share in enumerate(mine):  # a workload on several GPUs: gpu{k} is its k-th, as it numbers them
        key = f"system/{ATTRIBUTED_POWER.replace('gpu0_', f'gpu{k}_', 1)}"
        for t, w in binned(share.timeline, t0, TIMELINE_BIN_S):
            metrics.append(Metric(key, float(w), int(t * 1000), max(0, int((t - t0) * 1000))))
    return metrics


def energy_in(timeline, a: float, b: float) -> float:
    """Energy of a share's (interval end, W) timeline inside [a, b]; each interval starts where the one
    before it ended (the first one counts from its own end)."""
    out, prev = 0.0, None
    for t, w in timeline:
        if prev is not None:
            lo, hi = max(prev, a), min(t, b)
            if hi > lo:
                out += w * (hi - lo)
        prev = t
    return out


def overlap_metrics(name: str, parts: dict[int, Attribution], samples: float,
                    window: tuple[float, float]) -> list:
    """A workload's attributed energy (and J/sample) over the group's overlap window."""
    from mlflow.entities import Metric

    mine = [a.shares[name] for a in parts.values() if name in a.shares]
    if not mine:
        return []
    now_ms = int(time.time() * 1000)
    energy = sum(energy_in(s.timeline, *window) for s in mine)
    values = {"overlap_gpu_energy_attributed_j": energy}
    if samples > 0:
        values["overlap_energy_per_sample_attributed_j"] = energy / samples
    return [Metric(f"summary/{k}", float(v), now_ms, 0) for k, v in values.items()]


def parent_summary(parts: dict[int, Attribution], samples_by_name: dict[str, float]) -> dict[str, float]:
    """The group's side of the split: idle, unattributed, and each workload's part by name."""
    if not parts:
        return {}
    out = {"gpu_energy_attributed_total_j": sum(a.total_j for a in parts.values()),
           "gpu_energy_idle_j": sum(a.idle_j for a in parts.values()),
           "gpu_energy_unattributed_j": sum(a.unattributed_j for a in parts.values()),
           "gpu_idle_power_w": sum(a.idle_power_w for a in parts.values()),
           "attribution_even_split_s": max(a.even_split_s for a in parts.values()),
           "attribution_work_split_s": max(a.work_split_s for a in parts.values()),
           "attribution_overhead_pooled_s": max(a.overhead_pooled_s for a in parts.values())}
    for name, samples in samples_by_name.items():
        energy = sum(a.shares[name].energy_j for a in parts.values() if name in a.shares)
        if any(name in a.shares for a in parts.values()):
            out[f"{metric_name(name)}_gpu_energy_attributed_j"] = energy
            out[f"{metric_name(name)}_gpu_energy_attributed_low_j"] = sum(
                a.shares[name].low_j for a in parts.values() if name in a.shares)
            out[f"{metric_name(name)}_gpu_energy_attributed_high_j"] = sum(
                a.shares[name].high_j for a in parts.values() if name in a.shares)
            if samples > 0:
                out[f"{metric_name(name)}_energy_per_sample_attributed_j"] = energy / samples
    return out
