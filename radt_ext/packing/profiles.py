"""What the store knows about a queue's jobs: each job's exclusive profile, the pairs already measured
side by side (each one's slowdown beside the other over their overlap, the parent tag
`collocation.pairs`, on the GPU model they ran on), what a job's start-up cost the active phase beside
it (the parent tag `collocation.startup_pairs`), what a group run costs of its own, and the jobs a
packed group already FINISHED.

One scan of the experiment's runs. A job is known by its workload hash (tag `sweep.workload_hash`,
the key collocated variants find their exclusive baselines by; a pooled job's names the pool, not a
GPU, so a profile measured on any device of the pool counts): its profile is the latest FINISHED
exclusive child run with that hash measured on the pool's GPU model (tag `sweep.gpu_model`), else the
latest of any, with the device-level figures of its parent when the parent ran that job alone.
Active-phase summaries are read first, whole-run ones where a run has no others. A job's wall time is
its time outside the active phase (the whole run less the active phase: start-up and wind-down; else
`startup_s`) + its active phase: only the active phase is slowed by a GPU's other jobs.
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

from radt_ext.collocation import pairs
from radt_ext.errors import UsageError
from radt_ext.figures.summary_names import SUMMARY, upgrade
from radt_ext.sweep.plain_store import PASS_TAG

JOB_TAG = "pack.job"  # a packed group's child: the hash of the sweep variant (job) it ran

# each figure: its active-phase summary name first, then the whole run's (runs recorded before the
# active phase existed have only whole-run figures; summary_names.upgrade gives them today's e2e_ names)
NAMES = {
    "duration_s": ("active_s", "e2e_duration_s"),
    "sm_pct": ("gpu_mean_avg_sm_active_pct", "e2e_gpu_mean_avg_sm_active_pct"),
    "dram_pct": ("gpu_mean_avg_dram_active_pct", "e2e_gpu_mean_avg_dram_active_pct"),
    "busy_pct": ("gpu_mean_avg_util_pct", "e2e_gpu_mean_avg_util_pct"),
    "mem_mib": ("gpu_max_peak_mem_mib", "e2e_gpu_max_peak_mem_mib"),
    "power_w": ("gpu_total_avg_power_w", "e2e_gpu_total_avg_power_w"),
    "energy_j": ("gpu_total_energy_j", "e2e_gpu_total_energy_j"),
    "idle_power_w": ("gpu_idle_power_w",),
    "startup_s": ("startup_s",),
    "e2e_duration_s": ("e2e_duration_s",),
    # the whole run's GPU energy: the job's attributed share (its own span), else the group's
    "e2e_energy_j": ("gpu_energy_attributed_j", "e2e_gpu_total_energy_j"),
    "throughput": ("throughput_samples_per_s", "e2e_throughput_samples_per_s",  # else steps/s: samples not known
                   "throughput_steps_per_s", "e2e_throughput_steps_per_s"),
    "cpu_pct": ("proc_avg_cpu_pct", "e2e_proc_avg_cpu_pct"),
}
_GPU_MEMORY = re.compile(r"(?:^|\.)gpu\.\d+\.memory_total_mib$")
_CORES = "machine.cpu_logical_cores"


@dataclass
class Profile:
    key: str  # workload hash
    run_id: str  # the exclusive child run
    duration_s: float | None = None
    sm_pct: float | None = None
    dram_pct: float | None = None
    busy_pct: float | None = None  # share of time a kernel ran (NVML utilization)
    mem_mib: float | None = None
    power_w: float | None = None
    energy_j: float | None = None
    idle_power_w: float | None = None
    throughput: float | None = None  # samples/s (steps/s where samples are not known): None when the job reports no progress (the guard cannot watch it)
    cpu_pct: float | None = None  # its process tree's CPU (100 = one core)
    host_cores: float | None = None  # the logical CPUs of the host it was measured on
    gpu_memory_mib: float | None = None
    phase: str = "whole run"  # "active phase" where the run had active-phase summaries
    gpu_model: str | None = None  # the GPU model it was measured on, where the run says
    startup_s: float | None = None  # before the active phase, as the run logged it
    e2e_duration_s: float | None = None
    e2e_energy_j: float | None = None  # GPU energy over the whole run alone
    outside_s: float = 0.0  # outside the active phase: start-up and wind-down (0 for a whole-run profile)
    def wall_s(self, slowdown: float = 1.0) -> float | None:
        """Predicted wall time: the time outside the active phase as alone + the active phase x its slowdown."""
        return self.outside_s + self.duration_s * slowdown if self.duration_s else None

    def outside_power_w(self, idle_power_w: float | None = None) -> float | None:
        """The GPU's average power outside the active phase: the whole run's energy less the active
        phase's, over that time; else the idle power."""
        if not self.outside_s:
            return 0.0
        if self.e2e_energy_j is not None and self.power_w is not None and self.duration_s:
            return max(0.0, (self.e2e_energy_j - self.power_w * self.duration_s) / self.outside_s)
        return idle_power_w

    @property
    def usable(self) -> bool:
        """Enough to predict from: a duration and the GPU's activity."""
        return bool(self.duration_s) and self.sm_pct is not None

    @property
    def active_energy_j(self) -> float | None:
        if self.power_w is not None and self.duration_s:
            return self.power_w * self.duration_s
        return self.energy_j

    @property
    def alone_energy_j(self) -> float | None:
        """GPU energy of the whole run alone (start-up included): what a job's attributed energy measures."""
        active, outside = self.active_energy_j, self.outside_power_w(self.idle_power_w)
        if active is None or outside is None:
            return None
        return active + outside * self.outside_s


@dataclass
class MeasuredGroup:
    """Jobs measured side by side (today a pair, from the parent's `collocation.pairs`)."""
    run_id: str  # the group's parent
    mode: str
    slowdowns: dict[str, list[float]]  # workload hash -> each member's slowdown beside the others (a hash may repeat)
    start_ms: int = 0
    gpu_model: str | None = None  # the GPU model it was measured on, where its runs say

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(sorted(k for k, v in self.slowdowns.items() for _ in v))

    def holds(self, keys: list[str]) -> bool:
        """Whether these jobs (a hash may repeat) are all members of this group."""
        return all(keys.count(k) <= len(self.slowdowns.get(k, ())) for k in set(keys))


@dataclass
class MeasuredBoot:
    """One job's slowdown in its active phase while another started up beside it."""
    run_id: str  # the group's parent
    mode: str
    active_key: str  # workload hash of the job in its active phase
    starting_key: str  # workload hash of the job starting up
    slowdown: float
    start_ms: int = 0


@dataclass
class Knowledge:
    profiles: dict[str, Profile] = field(default_factory=dict)
    groups: list[MeasuredGroup] = field(default_factory=list)  # newest first
    boots: list[MeasuredBoot] = field(default_factory=list)  # newest first
    packed_done: dict[str, str] = field(default_factory=dict)  # job hash -> FINISHED child run id
    gpu_memory_mib: float | None = None
    group_overhead_s: float = 0.0  # what a group run costs beyond its jobs' wall time (see group_overhead)


def _summary(metrics: dict[str, float]) -> dict[str, float]:
    """A run's summaries by today's names (a run recorded under the old names gets their e2e_ names)."""
    return {k[len(SUMMARY):]: v for k, v in upgrade(metrics).items() if k.startswith(SUMMARY)}


def profile_of(child, parent=None) -> Profile:
    """A job's profile from its exclusive child run and, when that parent ran it alone, the parent."""
    sources = [_summary(child.data.metrics)]
    if parent is not None and parent.data.tags.get("collocation.size", "1") == "1":
        sources.append(_summary(parent.data.metrics))
    p = Profile(key=child.data.tags.get("sweep.workload_hash", ""), run_id=child.info.run_id,
                gpu_model=child.data.tags.get("sweep.gpu_model"))
    for attr, names in NAMES.items():
        for name in names:
            hit = next((s[name] for s in sources if name in s), None)
            if hit is not None:
                setattr(p, attr, float(hit))
                break
    if any("active_s" in s for s in sources):
        p.phase = "active phase"
        if p.e2e_duration_s and p.duration_s:
            p.outside_s = max(0.0, p.e2e_duration_s - p.duration_s)
        elif p.startup_s:
            p.outside_s = p.startup_s
    # else a whole-run profile: its duration is the wall time already
    for run in (child, parent):
        for k, v in (run.data.tags.items() if run is not None else ()):
            if _GPU_MEMORY.search(k) or k == _CORES:
                try:
                    setattr(p, "host_cores" if k == _CORES else "gpu_memory_mib", float(v))
                except ValueError:
                    pass
    return p


def read(client, experiment: str, model: str | None = None) -> Knowledge:
    """Everything the planner needs from one experiment; an empty Knowledge when it does not exist.
    `model`: the pool's GPU model, whose profiles come before those of other (or unnamed) GPUs."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None or exp.lifecycle_stage != "active":
        return Knowledge()
    runs = client.search_runs([exp.experiment_id], "", max_results=50000, order_by=["attributes.start_time DESC"])
    by_id = {r.info.run_id: r for r in runs}
    kids: dict[str, list] = {}
    for r in runs:
        parent = r.data.tags.get(MLFLOW_PARENT_RUN_ID)
        if parent:
            kids.setdefault(parent, []).append(r)
    k = Knowledge()
    for r in runs:  # newest first: the first exclusive run of a hash (on the pool's model) is its profile
        tags = r.data.tags
        if r.info.status != "FINISHED" or not tags.get("sweep.workload_hash"):
            continue
        if tags.get(JOB_TAG):
            k.packed_done.setdefault(tags[JOB_TAG], r.info.run_id)
        if tags.get("collocation.mode") != "exclusive":
            continue
        known = k.profiles.get(tags["sweep.workload_hash"])
        if known is None or (model and known.gpu_model != model and tags.get("sweep.gpu_model") == model):
            parent = by_id.get(tags.get(MLFLOW_PARENT_RUN_ID, ""))
            p = profile_of(r, parent)
            k.profiles[p.key] = p
    if k.profiles:
        k.gpu_memory_mib = next((p.gpu_memory_mib for p in k.profiles.values() if p.gpu_memory_mib), None)
    k.group_overhead_s = group_overhead(by_id, kids)
    for parent_id, members in kids.items():
        parent = by_id.get(parent_id)
        mode = parent.data.tags.get("collocation.mode") if parent is not None else None
        measured = pairs.read(parent.data.tags.get(pairs.TAG)) if mode in ("naive", "mps") else []
        boots = pairs.read_startups(parent.data.tags.get(pairs.STARTUP_TAG)) if mode in ("naive", "mps") else []
        if not measured and not boots:
            continue
        measured_on = {m.data.tags.get("sweep.gpu_model") for m in members} - {None}
        gpu_model = measured_on.pop() if len(measured_on) == 1 else None
        if model and gpu_model and gpu_model != model:  # measured on another GPU model: says nothing here
            continue
        keys = {m.data.tags.get("collocation.workload"): m.data.tags.get("sweep.workload_hash") for m in members}
        for b in boots:
            a, s = keys.get(b["active"]), keys.get(b["starting"])
            if a and s:
                k.boots.append(MeasuredBoot(parent_id, mode, a, s, float(b["slowdown"]), parent.info.start_time or 0))
        for pair in measured:
            a, b = keys.get(pair["a"]), keys.get(pair["b"])
            if not a or not b:
                continue
            slowdowns: dict[str, list[float]] = {}
            for key, value in ((a, pair["slowdowns"][0]), (b, pair["slowdowns"][1])):
                slowdowns.setdefault(key, []).append(float(value))
            k.groups.append(MeasuredGroup(parent_id, mode, slowdowns, parent.info.start_time or 0, gpu_model))
    k.groups.sort(key=lambda g: -g.start_ms)
    k.boots.sort(key=lambda b: -b.start_ms)
    return k


class NoPairsSource(UsageError):
    """pack.pairs_from names an experiment the store does not have."""


def check_sources(client, pairs_from: tuple[str, ...], own: str | None = None) -> None:
    """NoPairsSource (one line) for the first of `pairs_from` the store lacks (client None: no store yet)."""
    for name in dict.fromkeys(n for n in pairs_from if n != own):
        if client is None or client.get_experiment_by_name(name) is None:
            where = "the store" if client is not None else "the store (there is none yet)"
            raise NoPairsSource(f"pack.pairs_from: no experiment {name!r} in {where}; name one whose groups "
                                "measured pairs (a sweep of two-job naive or mps groups), or remove it")


def measured_in(client, pairs_from: tuple[str, ...], model: str | None = None, own: str | None = None) -> Knowledge:
    """The pairs and start-ups measured in the experiments `pairs_from` (a sweep of two-job groups of the same
    commands: the same workload hashes), each once and `own` left out; their profiles and packed runs stay
    theirs. A name not in the store: one line (NoPairsSource), before anything runs."""
    k = Knowledge()
    check_sources(client, pairs_from, own)
    for name in dict.fromkeys(n for n in pairs_from if n != own):
        other = read(client, name, model)
        k.groups += other.groups
        k.boots += other.boots
    return k


def with_measured(k: Knowledge, other: Knowledge) -> Knowledge:
    """`k` knowing also `other`'s measured pairs and start-ups (measured_in), newest first."""
    k.groups = sorted(k.groups + other.groups, key=lambda g: -g.start_ms)
    k.boots = sorted(k.boots + other.boots, key=lambda b: -b.start_ms)
    return k


def read_with(client, experiment: str, pairs_from: tuple[str, ...] = (), model: str | None = None) -> Knowledge:
    """read(experiment) knowing also what the experiments `pairs_from` measured (measured_in)."""
    return with_measured(read(client, experiment, model), measured_in(client, pairs_from, model, own=experiment))


GAP_S = 30.0  # a pause longer than this between a sweep's groups on one GPU is not the executor's doing


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def group_overhead(by_id: dict, kids: dict[str, list]) -> float:
    """What a sweep's group run costs beyond its jobs' wall time, as measured: the median over its group
    runs of the parent's wall time less its longest job's (listeners, runs, the report, an MPS daemon),
    plus the median gap between one group's end and the next one's start on the same GPU (planning,
    dispatch; not across a sweep's report run, which ends one call of the sweep). 0 where the store
    holds no sweep's groups."""
    inside, ends, calls_end = [], {}, {}
    for r in by_id.values():
        if r.data.tags.get("sweep.role") == "report":
            calls_end.setdefault(r.data.tags.get("sweep.id"), []).append(r.info.start_time / 1000.0)
    for parent_id, members in kids.items():
        parent = by_id.get(parent_id)
        if parent is None or not parent.data.tags.get("sweep.id") or not parent.info.end_time \
                or parent.data.tags.get(PASS_TAG):  # a plain pass is no group run
            continue
        walls = [m.data.metrics.get("summary/e2e_duration_s") for m in members]
        if walls and None not in walls:
            inside.append(max(0.0, (parent.info.end_time - parent.info.start_time) / 1000.0 - max(walls)))
        where = (parent.data.tags["sweep.id"], parent.data.tags.get("collocation.gpu", ""))
        ends.setdefault(where, []).append((parent.info.start_time / 1000.0, parent.info.end_time / 1000.0))
    gaps = []
    for (sweep, _), spans in ends.items():
        spans.sort()
        gaps += [b0 - a1 for (_, a1), (b0, _) in zip(spans, spans[1:]) if 0.0 <= b0 - a1 < GAP_S
                 and not any(a1 <= t <= b0 for t in calls_end.get(sweep, ()))]
    return _median(inside) + _median(gaps)
