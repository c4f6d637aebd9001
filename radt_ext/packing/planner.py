"""A queue of jobs → groups, each for one GPU, with the mode, the predicted slowdown and energy of
every job and a one-line reason.

A job's predicted wall time is its time outside the active phase as alone (start-up, wind-down) + its
active phase times its predicted slowdown (model.py), or the wall time measured where the same jobs ran
together: start-ups barely use the GPU, so jobs sharing a GPU start up side by side for free, and a job
whose active phase is short beside its start-up is a cheap companion. A group's wall time adds the
store's figure for a group run's own cost (profiles.group_overhead). The bound (`max_slowdown`) holds
the active phase's slowdown, the figure a collocated run measures.

1. Jobs without a usable profile run alone first (their run is the profile the next plans use).
2. The others, largest demand first (max of SM and DRAM active, then active time): while a GPU has
   nothing to run, the next job takes it alone; after that each goes into the open group where every
   member's predicted slowdown stays within `max_slowdown`, the group's peak memories fit the GPU with
   the headroom, the group has room, and the group's predicted wall time grows by less than the job's
   own wall time alone (sharing beats running after it); among those, one the store measured before
   one the model admits, then the one whose wall time grows least (then the lowest slowdown); where
   none fits, a trial (step 4); else a group of their own.
3. With the guard on (`pack.guard`, the default), a job that reports no progress (no throughput in its
   profile) cannot be watched while it runs: it shares a GPU only where a measured group of these very
   jobs (step 4) says it keeps the bound; else it runs alone.
4. A group's prediction in a mode, and what it rests on (Decision.basis): *measured* where the store
   can say (the same jobs measured together in that mode, newest run; else these jobs inside a larger
   measured group; else, for three or more, each one's excess over 1 summed over its measured pairs;
   else for a pair the closest measured pair, profiles within CLOSE_PCT points, its slowdowns scaled
   from the share of its active phases that overlapped to this pair's); else the *model*, the
   contention model over the jobs' overlapping phases (model.py); else, where the model is beyond the
   bound but every job can be watched and trials are on (`pack.trials`), a *trial*: planned at
   min(model, bound), the guard splitting the group if a job falls beyond it. A group the guard had to
   split counts at the slowdowns it read live (profiles.py). The mode is the allowed one with the
   lowest predicted slowdown that may share (naive on a tie: no daemon; for a trial, the model's).
5. Then one job at a time moves to another group, or to a group of its own, while that lowers the
   predicted makespan of the plan (within the same bounds, never trading a measurement for the model
   or a trial, trials only where the plan already needed one).
6. The groups go to GPUs longest (wall time) first, each to the GPU free soonest (the static plan a dry
   run prints; the executor replans from the store whenever a GPU frees).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from radt_ext.packing import model
from radt_ext.packing.options import PackOptions
from radt_ext.packing.profiles import Knowledge, Profile

CLOSE_PCT = 15.0  # a measured pair stands for another when their profiles differ by at most this (pct points)
MIN_OVERLAP = 0.25  # ... and when their active phases overlapped at least this much


@dataclass
class Job:
    name: str  # unique in the queue (a workload name inside a group)
    key: str  # workload hash: how its profile and measured groups are found
    ref: object = None  # what the executor runs (a sweep Variant)
    profile: Profile | None = None


BASES = ("measured", "model", "trial", "alone")


@dataclass
class Decision:
    jobs: list[Job]
    mode: str  # exclusive (alone), naive or mps
    slowdowns: list[float]
    energies: list[float | None]
    thread_pcts: list[int | None]
    source: str  # model / measured run / closest measured pair / trial
    reason: str
    overlaps: list[float] = field(default_factory=list)  # share of each job's active phase the others keep the GPU busy in
    # what the decision rests on: measured (the store's runs in `evidence`), model, trial (no measurement:
    # tried under the guard, planned at most at the bound), alone (a job by itself)
    basis: str = "alone"
    evidence: list[str] = field(default_factory=list)  # the group runs a measured decision rests on
    model_slowdowns: list[float] = field(default_factory=list)  # the contention model's, for a trial
    overhead_s: float = 0.0  # the group run's own cost beyond its jobs' wall time (profiles.group_overhead)
    walls: list[float | None] = field(default_factory=list)  # each job's wall time measured in this very group

    @property
    def max_slowdown(self) -> float:
        return max(self.slowdowns) if self.slowdowns else 1.0

    def wall_s(self, i: int) -> float | None:
        """Job i's predicted wall time: as measured in this very group, else outside the active phase +
        active phase x slowdown."""
        if self.walls and self.walls[i] is not None:
            return self.walls[i]
        p = self.jobs[i].profile
        return p.wall_s(self.slowdowns[i]) if p is not None else None

    @property
    def makespan_s(self) -> float | None:
        """The group's predicted wall time: its longest job's, plus the group run's own cost."""
        times = [self.wall_s(i) for i in range(len(self.jobs))]
        return max(times) + self.overhead_s if times and None not in times else None

    @property
    def energy_j(self) -> float | None:
        return sum(self.energies) if self.energies and None not in self.energies else None

    @property
    def summary(self) -> str:
        parts = [j.name + (f" (tp {tp})" if tp else "") for j, tp in zip(self.jobs, self.thread_pcts)]
        how = "alone" if self.mode == "exclusive" else f"{self.mode} {len(self.jobs)} jobs"
        return f"{how}: {' + '.join(parts)}"

    @property
    def basis_text(self) -> str:
        """What the decision rests on, in words: measured (naming the runs), model, trial or alone."""
        if self.basis == "measured":
            return f"measured (run {', '.join(r[:8] for r in self.evidence)})"
        if self.basis == "trial":
            return f"trial (model {max(self.model_slowdowns or [1.0]):.2f})"
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
        times = [j.profile.wall_s() if j.profile else None for d in self.decisions for j in d.jobs]
        if None in times:
            return None
        return max(_hand_out(sorted((t + self.overhead_s for t in times), reverse=True), len(self.gpus))[1])


class Planner:
    def __init__(self, knowledge: Knowledge, options: PackOptions, gpu_mode_ok: bool = True):
        self.k = knowledge
        self.opts = options
        self.modes = [m for m in options.modes if gpu_mode_ok or m != "mps"]
        self.gpu_memory = options.gpu_memory_mib or knowledge.gpu_memory_mib
        idle = [p.idle_power_w for p in knowledge.profiles.values() if p.idle_power_w]
        self.idle_power_w = min(idle) if idle else None
        self.cpus: float | None = None  # the host's logical CPUs per GPU of the pool (plan() sets it)
        self.trying = False  # predict() may plan a trial (plan() turns it on where nothing else fits)

    # -- predictions ------------------------------------------------------------------
    def _measured(self, jobs: list[Job], mode: str, overlaps: list[float],
                  near: bool = True) -> tuple[list[float], str, list[str], list[float | None]] | None:
        """The slowdowns the store measured for these jobs (their source, the runs, and each one's wall
        time where the same jobs were measured together): together, else inside
        a larger group measured together (at most that slow), else for three or more each one's excess
        over 1 summed over its measured pairs, else (`near`) for a pair the closest measured pair, scaled
        from its overlaps to these (`overlaps`); None: nothing was measured."""
        keys = [j.key for j in jobs]
        within = [g for g in self.k.groups if g.mode == mode and g.holds(keys)]  # newest first
        if within:
            g = min(within, key=lambda x: len(x.keys))  # the smallest, then the newest
            seen: dict[str, int] = {}
            out, walls = [], []
            for j in jobs:
                n = seen[j.key] = seen.get(j.key, -1) + 1
                out.append(g.slowdowns[j.key][n])
                walls.append(g.walls.get(j.key, [None] * (n + 1))[n])
            same = len(g.keys) == len(keys)
            where = "together" if same else f"within a group of {len(g.keys)}"
            return out, f"measured {where} in run {g.run_id[:8]}", [g.run_id], walls if same else []
        if len(jobs) > 2:
            excess, runs = [0.0] * len(jobs), []
            for i in range(len(jobs)):
                for k in range(i + 1, len(jobs)):
                    pair = self._measured([jobs[i], jobs[k]], mode, [], near=False)
                    if pair is None:
                        break
                    excess[i] += pair[0][0] - 1.0
                    excess[k] += pair[0][1] - 1.0
                    runs += [r for r in pair[2] if r not in runs]
                else:
                    continue
                break
            else:
                return ([1.0 + max(0.0, e) for e in excess],
                        f"measured pairs added (runs {', '.join(r[:8] for r in runs)})", runs, [])
        if len(jobs) != 2 or not near:
            return None
        best = None
        for g in self.k.groups:
            if g.mode != mode or len(g.keys) != 2:
                continue
            a, b = (self.k.profiles.get(x) for x in g.keys)
            if a is None or b is None or not a.usable or not b.usable:
                continue
            for first, second in ((a, b), (b, a)):
                d = _distance(jobs[0].profile, first) + _distance(jobs[1].profile, second)
                if d <= CLOSE_PCT and (best is None or d < best[0]):
                    best = (d, g, first.key, second.key)
        if best is None:
            return None
        d, g, ka, kb = best
        sa = g.slowdowns[ka][0]
        sb = g.slowdowns[kb][-1] if ka == kb else g.slowdowns[kb][0]
        then = model.timeline([self.k.profiles[ka], self.k.profiles[kb]], mode, self.cpus).overlaps
        if min(then) < MIN_OVERLAP:  # that pair barely met: it says little about a pair that does
            return None
        scaled = [1.0 + (x - 1.0) * f / f0 for x, f, f0 in zip((sa, sb), overlaps, then)]
        return scaled, f"closest measured pair, run {g.run_id[:8]} ({d:.0f} pts away)", [g.run_id], []

    def may_try(self, jobs: list[Job]) -> bool:
        """Whether these jobs may share a GPU on trial: the guard is on to split them, and it can watch
        every one of them (a throughput alone to compare its live progress with)."""
        return (self.opts.guard and self.opts.trials and len(jobs) > 1
                and all(j.profile is not None and j.profile.throughput for j in jobs))

    def predict(self, jobs: list[Job], mode: str) -> Decision:
        for j in jobs:
            j.profile = j.profile or self.k.profiles.get(j.key)
        profiles = [j.profile for j in jobs]
        line = model.timeline(profiles, mode, self.cpus)
        measured = self._measured(jobs, mode, line.overlaps) if len(jobs) > 1 else None
        basis, evidence, raw, walls = ("model" if len(jobs) > 1 else "alone"), [], [], []
        if measured:
            slow, source, evidence, walls = measured
            basis = "measured"
        else:
            slow, source = line.slowdowns, ("alone" if len(jobs) == 1 else "contention model")
            beyond = max(slow) > self.opts.max_slowdown or not self.opts.model
            if self.trying and beyond and self.may_try(jobs):
                # nothing measured and the model refuses: tried under the guard, which splits the group
                # when a job falls beyond the bound, so it is planned at most at the bound
                raw, slow = slow, [min(x, self.opts.max_slowdown) for x in slow]
                basis, source = "trial", f"trial: nothing measured, contention model {max(raw):.2f}"
        tps = ([None] * len(jobs) if mode != "mps" else
               model.thread_percentages(profiles, self.opts.mps_thread_percentage, line.sm_demand))
        energies = [model.energy(p, s, len(jobs), self.idle_power_w) for p, s in zip(profiles, slow)]
        return Decision(list(jobs), mode if len(jobs) > 1 else "exclusive", slow, energies, tps, source, "",
                        line.overlaps, basis, evidence, raw, self.k.group_overhead_s, walls)

    def best(self, jobs: list[Job]) -> Decision:
        options = [self.predict(jobs, m) for m in self.modes] or [self.predict(jobs, "naive")]
        return min(options, key=lambda d: (self.over(d) is not None, d.basis == "trial",
                                           round(max(d.model_slowdowns or d.slowdowns), 6), d.mode != "naive"))

    def over(self, d: Decision) -> str | None:
        """Why a group's prediction does not let it share a GPU (None: it does)."""
        if d.max_slowdown > self.opts.max_slowdown:
            return f"predicted {d.max_slowdown:.2f} > {self.opts.max_slowdown:g} ({d.mode}, {d.source})"
        if len(d.jobs) > 1 and d.basis == "model" and not self.opts.model:
            return f"nothing measured for these jobs in {d.mode} (pack.model: false)"
        if self.opts.guard and len(d.jobs) > 1 and (d.basis != "measured" or d.source.startswith("closest")):
            blind = [j.name for j in d.jobs if j.profile is not None and not j.profile.throughput]
            if blind:
                return (f"{', '.join(blind)} reports no progress, so the guard cannot watch it, and no measured "
                        "group of these jobs says it keeps the bound")
        return None

    def why_not(self, jobs: list[Job]) -> str | None:
        """Why these jobs cannot share a GPU (None: they can)."""
        if len(jobs) > self.opts.max_jobs_per_gpu:
            return f"more than {self.opts.max_jobs_per_gpu} jobs on a GPU"
        mem = [j.profile.mem_mib for j in jobs]
        if self.gpu_memory and len(jobs) > 1:
            if None in mem:
                return "a peak memory is unknown"
            room = self.gpu_memory * (1 - self.opts.memory_headroom_pct / 100)
            if sum(mem) > room:
                return (f"peak memory {sum(mem) / 1024:.1f} GiB > {room / 1024:.1f} GiB "
                        f"({100 - self.opts.memory_headroom_pct:g} % of the GPU)")
        return None

    # -- the plan ---------------------------------------------------------------------
    def plan(self, jobs: list[Job], gpus: list[str], free: int | None = None) -> Plan:
        """free: how many of the GPUs have nothing to run now (default all)."""
        free = len(gpus) if free is None else free
        cores = [p.host_cores for p in self.k.profiles.values() if p.host_cores]
        self.cpus = min(cores) / max(1, len(gpus)) if cores else None
        for j in jobs:
            p = self.k.profiles.get(j.key)
            j.profile = p if p is not None and p.usable else None
        first: list[Decision] = []
        for j in jobs:
            if j.profile is None:
                first.append(Decision([j], "exclusive", [1.0], [None], [None], "alone",
                                      "no exclusive profile in the store: runs alone first and is profiled"))
        groups: list[Decision] = []
        queue = sorted((j for j in jobs if j.profile is not None),
                       key=lambda j: (-model.pressure(j.profile), -(j.profile.duration_s or 0), j.name))
        alone_s = {id(j): (j.profile.wall_s() or 0.0) + self.k.group_overhead_s for j in queue}
        for j in queue:
            if len(groups) < free - len(first):  # a GPU with nothing to run: the job takes it alone
                d = self.predict([j], "exclusive")
                d.reason = "alone: a GPU is free for it"
                groups.append(d)
                continue
            fits, refusals, refused = self._fits(j, groups, alone_s[id(j)])
            if not fits and self.opts.trials and self.opts.guard:  # where nothing measured or modelled fits: a trial
                self.trying = True
                fits = self._fits(j, groups, alone_s[id(j)])[0]
                self.trying = False
            if fits:
                # a group the store measured before one the model admits (then the least added wall time)
                added, _, i, d, before = min(fits, key=lambda x: (_rank(x[3]), *x[:3]))
                d.reason = self._shared(d, f"wall time {before:.1f} -> {d.makespan_s or 0.0:.1f} s, "
                                           f"{j.name} alone {alone_s[id(j)]:.1f} s{self._memory_note(d.jobs)}")
                groups[i] = d
            else:
                d = self.predict([j], "exclusive")
                more = "; ..." if len(refusals) > 2 else ""
                d.reason = "alone: " + (refusals[0] if len(refusals) == 1 else
                                        f"fits no group ({'; '.join(refusals[:2])}{more})"
                                        if refusals else "the first job of the queue")
                beyond = [x for x in refused if x.max_slowdown > self.opts.max_slowdown]
                if beyond:  # alone because of what the store measured, or what the model says
                    d.basis, d.evidence = beyond[0].basis, beyond[0].evidence
                groups.append(d)
        self.trying = any(g.basis == "trial" for g in groups)  # a plan that needed trials may move jobs between them
        groups = self._regroup(groups, len(gpus))
        self.trying = False
        groups.sort(key=lambda d: -(d.makespan_s or 0.0))
        plan = Plan(first + groups, {g: [] for g in gpus}, self.opts.max_slowdown, self.k.group_overhead_s)
        where, _ = _hand_out([d.makespan_s or 0.0 for d in plan.decisions], len(gpus))
        for d, k in zip(plan.decisions, where):
            plan.gpus[gpus[k]].append(d)
        return plan

    def _fits(self, j: Job, groups: list[Decision], alone_s: float):
        """The groups job j may join: (fits as (added wall s, slowdown, index, decision, wall before),
        why each other group refused it, the refused decisions)."""
        fits, refusals, refused = [], [], []
        for i, g in enumerate(groups):
            together = g.jobs + [j]
            blocked = self.why_not(together)
            if blocked:
                refusals.append(f"with {'+'.join(x.name for x in g.jobs)}: {blocked}")
                continue
            d = self.best(together)
            over = self.over(d)
            if over:
                refusals.append(f"with {'+'.join(x.name for x in g.jobs)}: {over}")
                refused.append(d)
                continue
            added = (d.makespan_s or 0.0) - (g.makespan_s or 0.0)
            if added >= alone_s:
                refusals.append(f"with {'+'.join(x.name for x in g.jobs)}: wall time +{added:.1f} s "
                                f">= {alone_s:.1f} s alone")
                continue
            fits.append((round(added, 6), d.max_slowdown, i, d, g.makespan_s or 0.0))
        return fits, refusals, refused

    def _regroup(self, groups: list[Decision], gpus: int) -> list[Decision]:
        """Move one job at a time to another group, or to a group of its own, while a move lowers the
        plan's predicted makespan (the greedy order above cannot see that, e.g., three small jobs
        together beat each of them beside a large one)."""
        best = _makespan(groups, gpus)
        for _ in range(sum(len(g.jobs) for g in groups)):
            found = None
            for gi, g in enumerate(groups):
                for j in g.jobs:
                    rest = [x for x in g.jobs if x is not j]
                    if not rest:
                        left = None
                    elif len(rest) == 1:
                        left = self.predict(rest, "exclusive")
                    else:
                        left = self.best(rest)
                        if self.over(left):
                            continue
                    for ti in range(len(groups) + 1):
                        if ti == gi or (ti == len(groups) and not rest):
                            continue
                        together = (groups[ti].jobs if ti < len(groups) else []) + [j]
                        if len(together) == 1:
                            d = self.predict(together, "exclusive")
                        elif self.why_not(together):
                            continue
                        else:
                            d = self.best(together)
                            if self.over(d):
                                continue
                        was = max(_rank(g), _rank(groups[ti]) if ti < len(groups) else 0)
                        if max(_rank(d), _rank(left) if left else 0) > was:
                            continue  # a move never trades what was measured for what the model or a trial says
                        trial = [x for k, x in enumerate(groups) if k not in (gi, ti)] + [d] + ([left] if left else [])
                        span = _makespan(trial, gpus)
                        if span < best - 1e-6 and (found is None or span < found[0]):
                            found = (span, trial, d, left, j)
            if found is None:
                return groups
            span, groups, d, left, j = found
            note = f"regrouped: predicted makespan {best:.1f} -> {span:.1f} s"
            d.reason = self._shared(d, f"{note}{self._memory_note(d.jobs)}") if len(d.jobs) > 1 else f"alone: {note}"
            if left is not None:
                left.reason = (self._shared(left, f"{j.name} moved out ({note})") if len(left.jobs) > 1
                               else f"alone: {j.name} moved out ({note})")
            best = span
        return groups

    def _shared(self, d: Decision, why: str) -> str:
        """The reason of a group that shares a GPU: its prediction against the bound, then `why`."""
        launch = [j.name for j in d.jobs if j.profile is not None and model.launch_bound(j.profile)]
        note = f"; launch-bound: {', '.join(launch)}" if launch else ""
        guard = "; guarded" if self.opts.guard else ""
        if d.basis == "trial":
            return (f"{d.mode}: on trial, planned at {d.max_slowdown:.2f} <= {self.opts.max_slowdown:g} (nothing "
                    f"measured together; the contention model says {max(d.model_slowdowns):.2f}{_overlap_note(d)}"
                    f"{note}); {why}; the guard splits it if a job falls beyond the bound")
        return (f"{d.mode}: predicted slowdown {d.max_slowdown:.2f} <= {self.opts.max_slowdown:g} "
                f"({d.source}{_overlap_note(d)}{note}); {why}{guard}")

    def _memory_note(self, jobs: list[Job]) -> str:
        mem = [j.profile.mem_mib for j in jobs]
        if not self.gpu_memory or None in mem:
            return "; memory not checked (GPU memory unknown)" if not self.gpu_memory else ""
        return f"; peak memory {sum(mem) / 1024:.1f} of {self.gpu_memory / 1024:.1f} GiB"


def _rank(d: Decision) -> int:
    """How well a decision's evidence holds: alone or measured 0, the model 1, a trial 2."""
    return 0 if len(d.jobs) == 1 else {"measured": 0, "model": 1}.get(d.basis, 2)


def _hand_out(times: list[float], gpus: int) -> tuple[list[int], list[float]]:
    """Each time, in this order, to the GPU free soonest: the GPU of each, and the GPUs' loads."""
    loads, where = [0.0] * max(1, gpus), []
    for t in times:
        k = loads.index(min(loads))
        where.append(k)
        loads[k] += t
    return where, loads


def _makespan(groups: list[Decision], gpus: int) -> float:
    """The predicted makespan of these groups handed out as the plan does: longest first."""
    return max(_hand_out(sorted((d.makespan_s or 0.0 for d in groups), reverse=True), gpus)[1])


def _overlap_note(d: Decision) -> str:
    """How much of the active phases the group's jobs overlap, where they do not all fully."""
    if not d.overlaps or min(d.overlaps) >= 0.995:
        return ""
    return f", active phases {100 * min(d.overlaps):.0f}-{100 * max(d.overlaps):.0f} % beside another job's GPU use"


def _distance(a: Profile, b: Profile) -> float:
    return sum(abs((x or 0.0) - (y or 0.0)) for x, y in ((a.sm_pct, b.sm_pct), (a.dram_pct, b.dram_pct),
                                                        (a.busy_pct, b.busy_pct)))
