"""A queue of jobs → what runs on each GPU, with each job's predicted wall time and slowdown (its wall
time in the queue over its wall time alone, as the job lives it) and a one-line reason.

1. Jobs without a usable profile run alone first (their run is the profile the next plans use).
2. With more than one job allowed on a GPU (`pack.max_jobs_per_gpu`), the others form one chain per GPU
   (chains.py): one job after another, each started so that its start-up runs beside the active phase
   of the job before it (charged what that start-up costs the active phase beside it), and two active
   phases side by side only where the store measured that pair within the bound (for their whole length
   where both budgets pay), or as a trial the guard can split without either job leaving the bound.
   Planned as the group runner starts a chain's jobs: job k only once job k-2 has ended, so never more
   than two of a chain's jobs alive at once and no group of three shares unmeasured. Chains are built
   in each allowed mode; the shorter plan wins (naive on a tie: no daemon).
3. With one job per GPU, each job runs alone, longest first, each on the GPU free soonest.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from radt_ext.packing import chains as chain_mod
from radt_ext.packing.options import PackOptions
from radt_ext.packing.profiles import Knowledge, Profile


@dataclass
class Job:
    name: str  # unique in the queue (a workload name inside a group)
    key: str  # workload hash: how its profile and measured groups are found
    ref: object = None  # what the executor runs (a sweep Variant)
    profile: Profile | None = None


BASES = ("measured", "trial", "start-up", "alone")


@dataclass
class Decision:
    jobs: list[Job]
    mode: str  # exclusive (alone), naive or mps
    slowdowns: list[float]  # predicted: wall time here over wall time alone
    energies: list[float | None]
    source: str  # alone / chain
    reason: str
    # what the decision rests on: measured (a link the store measured), trial (a link tried under the
    # guard), start-up (only start-ups beside active phases), alone (a job by itself)
    basis: str = "alone"
    evidence: list[str] = field(default_factory=list)  # the group runs a measured link rests on
    overhead_s: float = 0.0  # the group run's own cost beyond its jobs' wall time (profiles.group_overhead)
    walls: list[float | None] = field(default_factory=list)  # predicted wall times
    starts: list[float] = field(default_factory=list)  # each job's planned start from the group's start
    links: list = field(default_factory=list)  # chains.Link per job (None for the first)
    work_left: list = field(default_factory=list)  # per job: the job before's active seconds (alone) to go at its start

    @property
    def max_slowdown(self) -> float:
        return max(self.slowdowns) if self.slowdowns else 1.0

    def wall_s(self, i: int) -> float | None:
        if self.walls and self.walls[i] is not None:
            return self.walls[i]
        p = self.jobs[i].profile
        return chain_mod.phases(p).wall if p is not None and p.duration_s else None

    def offset_s(self, i: int) -> float | None:
        """Seconds after the job before it started that job i starts (None: with the group)."""
        return self.starts[i] - self.starts[i - 1] if self.starts and i > 0 else None

    def work_left_s(self, i: int) -> float | None:
        """The seconds (alone) of the job before's active phase still to go when job i starts, as planned
        (None: its offset only)."""
        return self.work_left[i] if i > 0 and i < len(self.work_left) else None

    @property
    def makespan_s(self) -> float | None:
        """The group's predicted wall time, plus the group run's own cost."""
        times = [self.wall_s(i) for i in range(len(self.jobs))]
        if not times or None in times:
            return None
        starts = self.starts or [0.0] * len(times)
        return max(s + t for s, t in zip(starts, times)) + self.overhead_s

    @property
    def energy_j(self) -> float | None:
        return sum(self.energies) if self.energies and None not in self.energies else None

    @property
    def summary(self) -> str:
        how = "alone" if self.mode == "exclusive" else f"{self.mode} chain of {len(self.jobs)}"
        return f"{how}: {' > '.join(j.name for j in self.jobs) if self.starts else ' + '.join(j.name for j in self.jobs)}"

    @property
    def basis_text(self) -> str:
        if self.basis == "measured":
            return f"measured (run {', '.join(r[:8] for r in self.evidence)})"
        return self.basis


@dataclass
class Plan:
    decisions: list[Decision]  # in the order they are handed to GPUs
    gpus: dict[str, list[Decision]] = field(default_factory=dict)
    max_slowdown: float = 1.5
    overhead_s: float = 0.0  # each group run's own cost (profiles.group_overhead)

    def predicted_makespan_s(self) -> float | None:
        loads = []
        for ds in self.gpus.values():
            times = [d.makespan_s for d in ds]
            if None in times:
                return None
            loads.append(sum(times))
        return max(loads) if loads else 0.0

    def one_per_gpu_makespan_s(self) -> float | None:
        """The same jobs one per GPU at a time (wall time alone), longest first to the GPU free soonest."""
        times = [chain_mod.phases(j.profile).wall if j.profile else None for d in self.decisions for j in d.jobs]
        if None in times:
            return None
        return max(_hand_out(sorted((t + self.overhead_s for t in times), reverse=True), len(self.gpus))[1])


def _alone(j: Job, reason: str) -> Decision:
    p = j.profile
    return Decision([j], "exclusive", [1.0], [p.alone_energy_j if p is not None else None], "alone", reason)


class Planner:
    def __init__(self, knowledge: Knowledge, options: PackOptions, gpu_mode_ok: bool = True):
        self.k = knowledge
        self.opts = options
        self.modes = [m for m in options.modes if gpu_mode_ok or m != "mps"]
        self.gpu_memory = options.gpu_memory_mib or knowledge.gpu_memory_mib

    def chains(self, mode: str) -> chain_mod.ChainPlanner:
        return chain_mod.ChainPlanner(self.k, mode, self.opts.max_slowdown, self.opts.trials and self.opts.guard,
                                      self.gpu_memory, self.opts.memory_headroom_pct)

    def plan(self, jobs: list[Job], gpus: list[str], free: int | None = None) -> Plan:
        """free: how many of the GPUs have nothing to run now (default all)."""
        for j in jobs:
            p = self.k.profiles.get(j.key)
            j.profile = p if p is not None and p.usable else None
        first = [_alone(j, "no exclusive profile in the store: runs alone first and is profiled")
                 for j in jobs if j.profile is None]
        known = [j for j in jobs if j.profile is not None]
        groups: list[Decision] = []
        if known and self.opts.max_jobs_per_gpu > 1 and self.modes:
            groups = self._chained(known, len(gpus))
        else:
            for j in known:
                why = "one job per GPU (pack.max_jobs_per_gpu: 1)" if self.opts.max_jobs_per_gpu == 1 else \
                    "no mode to share a GPU in"
                groups.append(_alone(j, f"alone: {why}"))
        for d in groups:
            d.overhead_s = self.k.group_overhead_s
        groups.sort(key=lambda d: -(d.makespan_s or 0.0))
        plan = Plan(first + groups, {g: [] for g in gpus}, self.opts.max_slowdown, self.k.group_overhead_s)
        where, _ = _hand_out([d.makespan_s or 0.0 for d in plan.decisions], len(gpus))
        for d, k in zip(plan.decisions, where):
            plan.gpus[gpus[k]].append(d)
        return plan

    def _chained(self, jobs: list[Job], gpus: int) -> list[Decision]:
        """One chain per GPU in each allowed mode; the mode with the shortest plan (naive on a tie)."""
        best = None
        for mode in sorted(self.modes, key=lambda m: m != "naive"):
            chains = self.chains(mode).plan(jobs, gpus)
            span = max(c.makespan_s for c in chains)
            if best is None or span < best[0] - 1e-6:
                best = (span, mode, chains)
        _, mode, chains = best
        return [self._decision(c, mode) for c in chains]

    def _decision(self, c: chain_mod.Chain, mode: str) -> Decision:
        if len(c.jobs) == 1:
            return _alone(c.jobs[0], "alone: the only job of its GPU")
        kinds = [link.basis for link in c.links[1:]]
        basis = next((b for b in ("measured", "trial") if b in kinds), "start-up")
        evidence = list(dict.fromkeys(link.evidence for link in c.links[1:] if link.basis == "measured"))
        energies = [j.profile.alone_energy_j for j in c.jobs]
        walls_alone = sum(chain_mod.phases(j.profile).wall for j in c.jobs)
        reason = (f"{mode}: {len(c.jobs)} jobs one after another, {walls_alone:.1f} s alone in all -> "
                  f"{c.makespan_s:.1f} s; predicted slowdown at most {max(c.slowdowns):.2f} <= "
                  f"{self.opts.max_slowdown:g} (wall time here / alone); "
                  + "; ".join(f"{j.name}: {link.text()}" for j, link in zip(c.jobs[1:], c.links[1:])))
        if self.opts.guard:
            reason += "; guarded"
        return Decision(list(c.jobs), mode, list(c.slowdowns), energies, "chain", reason, basis, evidence,
                        walls=list(c.walls), starts=list(c.starts), links=list(c.links), work_left=list(c.work_left))


def _hand_out(times: list[float], gpus: int) -> tuple[list[int], list[float]]:
    """Each time, in this order, to the GPU free soonest: the GPU of each, and the GPUs' loads."""
    loads, where = [0.0] * max(1, gpus), []
    for t in times:
        k = loads.index(min(loads))
        where.append(k)
        loads[k] += t
    return where, loads
