"""What a collocation group is: its mode and its workloads, and the checks on them."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from radt_ext.errors import UsageError

MODES = ("exclusive", "naive", "mps", "mig")
CPU = "cpu"  # a device value meaning "no GPU" (CUDA_VISIBLE_DEVICES="")
NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")  # a name of a workload or sweep; \Z: `$` lets a trailing newline through
_MEM_LIMIT = re.compile(r"^\d+(\.\d+)?[KMGT]?$")


@dataclass
class Workload:
    name: str
    command: list[str]
    device: str = "0"  # GPU index, GPU-<uuid>, "cpu", or several GPUs joined by "," (one workload on them all)
    params: dict[str, str] = field(default_factory=dict)  # logged on the child run
    env: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    mps_thread_percentage: int | None = None  # CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
    mps_pinned_mem_limit: str | None = None  # e.g. "20G" -> CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=20G"
    mig: str | None = None  # a MIG profile such as "3g.71gb", or an existing MIG-<uuid>
    cwd: str | None = None
    launch: list[str] = field(default_factory=list)  # put before the command (a launcher pinning its CPUs)
    # starts this long after the workload before it in the group started, or when that one ended if
    # sooner (a chain: its start-up beside the other's active phase); None: with the group
    start_offset_s: float | None = None
    # ... and not before the workload before it has at most this many seconds (at its rate alone) of its
    # active phase to go, where the guard follows its progress (a job before that runs late is not met
    # early); None: the offset only
    start_work_left_s: float | None = None


@dataclass
class Group:
    mode: str
    workloads: list[Workload]
    experiment_name: str | None = None
    run_name: str | None = None
    listeners: str | None = None  # device-level, on the parent (default: available nvml,gpm,smi,dcgm,rapl)
    child_listeners: str | None = None  # per workload (default: available top,gpu_procs; +gpm under MIG)
    interval: float | None = None
    tags: dict[str, str] = field(default_factory=dict)  # parent tags (sweep.id, sweep.hash, ...)
    child_tags: dict[str, str] = field(default_factory=dict)  # added to every child
    tracking_uri: str | None = None
    allow_mig_reconfigure: bool = False
    # workload name -> (exclusive run id, its summary/e2e_duration_s): slowdowns are computed against these runs
    # (their active-phase throughput, see GroupRunner._slowdown)
    baselines: dict[str, tuple[str, float]] = field(default_factory=dict)
    # a guard keeps each workload with a baseline within this slowdown while the group runs (guard.py):
    # a workload beyond it has the others paused until its active phase ends; None: no guard
    guard_slowdown: float | None = None
    # a measurement group: once every workload's active phase has run this long beside the others (or one
    # workload's alone), each is stopped (SIGINT to its process tree, as Ctrl-C) and its run ends FINISHED,
    # tag collocation.measured_s; the pair it measured is the parent's collocation.pairs as for any shared
    # group. None: each runs to its end
    measure_s: float | None = None

    @property
    def devices(self) -> list[str]:
        """Every GPU (or cpu) of the group once, a workload's several GPUs each on their own."""
        out: list[str] = []
        for w in self.workloads:
            for d in w.device.split(","):
                if d.strip() not in out:
                    out.append(d.strip())
        return out


def check(group: Group) -> None:
    """One-line UsageError for a group that cannot run; nothing has started yet."""
    if group.mode not in MODES:
        raise UsageError(f"unknown collocation mode {group.mode!r}; choose one of {', '.join(MODES)}")
    if not group.workloads:
        raise UsageError("a collocation group needs at least one workload")
    if group.guard_slowdown is not None and not group.guard_slowdown >= 1:
        raise UsageError(f"guard slowdown {group.guard_slowdown!r} is not a bound on slowdown; give a number >= 1")
    names = [w.name for w in group.workloads]
    for w in group.workloads:
        if not NAME.match(w.name):
            raise UsageError(f"workload name {w.name!r}: use letters, digits, '_', '-' or '.'")
        if names.count(w.name) > 1:
            raise UsageError(f"workload name {w.name!r} is used twice in one group; give each workload its own name")
        if not w.command:
            raise UsageError(f"workload {w.name!r} has no command")
        if w.start_offset_s is not None and (group.mode == "exclusive" or not w.start_offset_s >= 0):
            raise UsageError(f"workload {w.name!r}: a start offset ({w.start_offset_s!r}) needs a shared mode "
                             "and a number of seconds >= 0")
        if group.mode in ("mps", "mig") and w.device == CPU:
            raise UsageError(f"workload {w.name!r}: mode {group.mode} needs a GPU, not device 'cpu'")
        if group.mode in ("mps", "mig") and "," in w.device:
            raise UsageError(f"workload {w.name!r}: mode {group.mode} runs a workload on one GPU, not {w.device!r}")
        if w.mps_thread_percentage is not None:
            if group.mode != "mps":
                raise UsageError(f"workload {w.name!r}: mps thread percentage applies only to mode mps")
            if not 1 <= int(w.mps_thread_percentage) <= 100:
                raise UsageError(f"workload {w.name!r}: mps thread percentage {w.mps_thread_percentage} "
                                 "is not in 1..100")
        if w.mps_pinned_mem_limit is not None:
            if group.mode != "mps":
                raise UsageError(f"workload {w.name!r}: mps pinned memory limit applies only to mode mps")
            if not _MEM_LIMIT.match(str(w.mps_pinned_mem_limit)):
                raise UsageError(f"workload {w.name!r}: mps pinned memory limit {w.mps_pinned_mem_limit!r} "
                                 "is not a size like 20G or 512M")
        if w.mig is not None and group.mode != "mig":
            raise UsageError(f"workload {w.name!r}: a MIG profile/device applies only to mode mig")
        if group.mode == "mig" and not w.mig:
            raise UsageError(f"workload {w.name!r}: mode mig needs a MIG profile (e.g. 3g.71gb) or MIG-<uuid>")


def metric_name(name: str) -> str:
    """A workload name as a metric word (lower case, `_` only)."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "workload"
