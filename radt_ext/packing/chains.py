"""A GPU's jobs as a chain: one after another, each started so that its start-up (imports, data, model,
CUDA context: time in which the GPU barely works) runs beside the active phase of the job before it.
Two active phases overlap only where that keeps both jobs within the promise whatever the overlap
turns out to cost. How a job follows the one before it (a Link), with r the seconds of the earlier
job's active phase (alone) still to go when the later one's begins:

- *measured*: the store measured the two side by side in this mode (slowdowns x_i, x_j over their
  overlap): r costs the earlier job r(x_i - 1) of wall time and the later r x_i (1 - 1/x_j); r is the
  largest whose cost fits each job's share of its budget, where overlapping pays (it saves
  r (1 + x_i/x_j - x_i) of the GPU's time).
- *trial*: nothing measured, both watched by the guard, which reads both rates over its steady window
  (guard.SETTLE_S + guard.WINDOW_S = W) and, where one is beyond the bound, pauses the later job until
  the earlier one's active phase ends. At worst the earlier job loses W and the later W + r: r is the
  largest that fits both budgets, no trial where that is under MIN_TRIAL_S.
- *start-up*: the later job's active phase begins where the earlier one's ends (its start-up beside it).
- *after*: the two do not fit the GPU's memory together: the later job starts when the earlier ends.

A job's budget is what the bound leaves it, planned at PLAN_SHARE of the bound (b): (1 - 1/b) x its
active phase, the seconds a job that stops on time can lose of its work and keep its rate within b (a job
that stops on work could lose (b - 1) x its wall, never less); half of it for each end of the job.

`simulate` plays a chain forward from the jobs' phases alone (start-up, active phase, wind-down), the
pair slowdowns and the guard's splits; the planner predicts with it, and tests replay measured queues
through it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from radt_ext.collocation import guard
from radt_ext.packing import model
from radt_ext.packing.profiles import Knowledge, Profile

PLAN_SHARE = 0.93  # plan each job within this share of the bound: alone walls vary by a few percent
MIN_TRIAL_S = 2.0  # an overlap shorter than this measures nothing
STEADY_S = guard.SETTLE_S + guard.WINDOW_S  # what the guard needs before it judges a rate
UNKNOWN_PAIR = 2.0  # the slowdown of two active phases that meet unplanned (a late job)


@dataclass
class Phases:
    """A job as the chain sees it: seconds alone of start-up, active phase and wind-down."""
    startup: float
    active: float
    tail: float

    @property
    def wall(self) -> float:
        return self.startup + self.active + self.tail


def phases(p: Profile) -> Phases:
    active = p.duration_s or 0.0
    wall = max(p.e2e_duration_s or 0.0, p.wall_s() or 0.0, active)
    startup = p.startup_s if p.phase == "active phase" and p.startup_s is not None else 0.0
    startup = max(0.0, min(startup, wall - active))
    return Phases(startup, active, max(0.0, wall - startup - active))


def budget_s(ph: Phases, bound: float) -> float:
    """The seconds of sharing's cost a job can take within PLAN_SHARE of the bound (see the module)."""
    b = PLAN_SHARE * bound
    return (1.0 - 1.0 / b) * ph.active if b > 1.0 else 0.0


@dataclass
class Link:
    """How a job follows the one before it on its chain."""
    basis: str  # start-up, measured, trial or after
    overlap_s: float = 0.0  # r: the earlier job's active seconds (alone) left when the later one's begins
    slowdowns: tuple[float, float] = (UNKNOWN_PAIR, UNKNOWN_PAIR)  # (earlier, later) side by side
    evidence: str = ""  # the group run that measured them
    split: bool = False  # a trial the guard is expected to split (the model puts a job beyond the bound)

    def text(self) -> str:
        if self.basis == "measured":
            return (f"measured (run {self.evidence[:8]}: {self.slowdowns[0]:.2f}/{self.slowdowns[1]:.2f}), "
                    f"{self.overlap_s:.1f} s side by side")
        if self.basis == "trial":
            return (f"trial, {self.overlap_s:.1f} s side by side under the guard (model "
                    f"{self.slowdowns[0]:.2f}/{self.slowdowns[1]:.2f})")
        return {"start-up": "its start-up beside the job before", "after": "after the job before (memory)"}.get(
            self.basis, self.basis)


@dataclass
class Played:
    starts: list[float]
    active_from: list[float | None]
    active_to: list[float | None]
    ends: list[float]
    paused_s: list[float] = field(default_factory=list)


def simulate(ph: list[Phases], starts: list[float], pair: Callable[[int, int], float],
             splits: dict[int, int] | None = None) -> Played:
    """Play jobs forward from their start times: start-up and wind-down at their own pace, active phases
    slowed by each other active phase beside them (pair(k, other): k's slowdown beside other), a job in
    `splits` (later -> earlier) paused once it has been active beside the earlier one for STEADY_S, until
    the earlier one's active phase ends."""
    n, splits = len(ph), splits or {}
    phase, left = ["wait"] * n, [0.0] * n
    a0, a1, ends = [None] * n, [None] * n, [0.0] * n
    beside, paused, paused_s = [0.0] * n, [False] * n, [0.0] * n
    t = 0.0
    for _ in range(100 * n + 100):
        for k in range(n):  # phases that begin or end now
            if phase[k] == "wait" and t >= starts[k] - 1e-9:
                phase[k], left[k] = "startup", ph[k].startup
            while phase[k] in ("startup", "active", "tail") and left[k] <= 1e-9:
                if phase[k] == "startup":
                    phase[k], left[k], a0[k] = "active", ph[k].active, t
                elif phase[k] == "active":
                    phase[k], left[k], a1[k] = "tail", ph[k].tail, t
                else:
                    phase[k], ends[k] = "done", t
        for j, i in splits.items():
            if paused[j] and phase[i] != "active":
                paused[j] = False
            elif phase[j] == "active" and phase[i] == "active" and beside[j] >= STEADY_S - 1e-9:
                paused[j] = True
        if all(p == "done" for p in phase):
            break
        active = [k for k in range(n) if phase[k] == "active" and not paused[k]]
        rate = [0.0] * n
        for k in range(n):
            if paused[k] or phase[k] in ("wait", "done"):
                continue
            x = 1.0
            if phase[k] == "active":
                for o in active:
                    if o != k:
                        x *= pair(k, o)
            rate[k] = 1.0 / x
        steps = [left[k] / rate[k] for k in range(n) if rate[k] > 0]
        steps += [starts[k] - t for k in range(n) if phase[k] == "wait"]
        steps += [STEADY_S - beside[j] for j, i in splits.items()
                  if phase[j] == "active" and phase[i] == "active" and not paused[j] and beside[j] < STEADY_S]
        if not steps:
            break
        dt = max(0.0, min(steps))
        for k in range(n):
            left[k] -= rate[k] * dt
            paused_s[k] += dt if paused[k] else 0.0
        for j, i in splits.items():
            if phase[j] == "active" and phase[i] == "active" and not paused[j]:
                beside[j] += dt
        t += dt
    return Played(list(starts), a0, a1, ends, paused_s)


@dataclass
class Chain:
    jobs: list  # planner.Job, in order
    links: list[Link | None]  # links[k]: how job k follows job k-1 (None for the first)
    starts: list[float]  # each job's planned start from the chain's start
    walls: list[float]  # predicted wall times
    slowdowns: list[float]  # predicted wall time / wall time alone

    @property
    def makespan_s(self) -> float:
        return max((s + w for s, w in zip(self.starts, self.walls)), default=0.0)


class ChainPlanner:
    """Links and start times of chains, and chains for a queue; `pair_of(job_i, job_j)` gives the
    measured (x_i, x_j, run id) of two jobs in this mode, or None."""

    def __init__(self, knowledge: Knowledge, mode: str, bound: float, trials: bool, gpu_memory_mib: float | None,
                 headroom_pct: float = 10.0):
        self.k, self.mode, self.bound, self.trials = knowledge, mode, bound, trials
        self.room = gpu_memory_mib * (1 - headroom_pct / 100) if gpu_memory_mib else None
        self._links: dict[tuple[str, str], Link] = {}
        self._chains: dict[tuple[str, ...], Chain] = {}

    def measured(self, a: Profile, b: Profile) -> tuple[float, float, str] | None:
        """The newest measurement of a and b side by side in this mode: (a's, b's slowdown, run id)."""
        for g in self.k.groups:  # newest first
            if g.mode != self.mode or len(g.keys) != 2 or not g.holds([a.key, b.key]):
                continue
            if a.key == b.key:
                return g.slowdowns[a.key][0], g.slowdowns[a.key][-1], g.run_id
            return g.slowdowns[a.key][0], g.slowdowns[b.key][0], g.run_id
        return None

    def link(self, i, j) -> Link:
        key = (i.name, j.name)
        if key not in self._links:
            self._links[key] = self._link(i.profile, j.profile)
        return self._links[key]

    def _link(self, pi: Profile, pj: Profile) -> Link:
        if self.room is not None and (pi.mem_mib is None or pj.mem_mib is None or pi.mem_mib + pj.mem_mib > self.room):
            return Link("after")
        hi, hj = phases(pi), phases(pj)
        gi, gj = budget_s(hi, self.bound) / 2, budget_s(hj, self.bound) / 2
        found = self.measured(pi, pj)
        if found is not None:
            xi, xj, run = found
            if 1.0 + xi / xj - xi <= 0.05:  # side by side they do no more than one after the other
                return Link("start-up", 0.0, (xi, xj), run)
            r = hi.active
            if xi > 1.0:
                r = min(r, gi / (xi - 1.0))
            if xj > 1.0:
                r = min(r, gj / (xi * (1.0 - 1.0 / xj)))
            return Link("measured", max(0.0, r), (xi, xj), run)
        xi, xj = model.slowdowns([pi, pj], self.mode)
        if self.trials and pi.throughput and pj.throughput and gi >= STEADY_S:
            r = min(hi.active - STEADY_S, gj - STEADY_S)
            if r >= MIN_TRIAL_S:
                return Link("trial", r, (xi, xj), split=max(xi, xj) > self.bound)
        return Link("start-up", 0.0, (xi, xj))

    def chain(self, jobs: list) -> Chain:
        key = tuple(j.name for j in jobs)
        if key not in self._chains:
            self._chains[key] = self._chain(jobs)
        return self._chains[key]

    def _chain(self, jobs: list) -> Chain:
        """Start times that give each link its overlap, never a job's active phase before the active phase
        of the job two before it ended; where the play puts a job beyond PLAN_SHARE of the bound, its links
        fall back to start-up."""
        links = [None] + [self.link(a, b) for a, b in zip(jobs, jobs[1:])]
        ph = [phases(j.profile) for j in jobs]
        for _ in range(len(jobs) + 1):
            played = self._play(jobs, ph, links)
            slow = [(e - s) / h.wall if h.wall else 1.0 for s, e, h in zip(played.starts, played.ends, ph)]
            over = [k for k, x in enumerate(slow) if x > PLAN_SHARE * self.bound + 1e-6]
            sharing = {k2 for k in over for k2 in (k, k + 1) if 0 < k2 < len(jobs) and links[k2].overlap_s > 0}
            if not sharing:
                break
            for k2 in sharing:  # the links of a job beyond the plan's share: its start-up beside, no more
                links[k2] = Link("start-up", 0.0, links[k2].slowdowns)
        walls = [e - s for s, e in zip(played.starts, played.ends)]
        return Chain(list(jobs), links, played.starts, walls, slow)

    def _play(self, jobs: list, ph: list[Phases], links: list) -> Played:
        starts = [0.0]
        for k in range(1, len(jobs)):
            before = simulate(ph[:k], starts, self._pairs(links), self._splits(links[:k]))
            link = links[k]
            if link.basis == "after":
                start = before.ends[k - 1]
            else:
                start = before.active_to[k - 1] - link.overlap_s - ph[k].startup
                if k >= 2:
                    start = max(start, before.active_to[k - 2] - ph[k].startup)
            starts.append(max(starts[-1], start))
        return simulate(ph, starts, self._pairs(links), self._splits(links))

    @staticmethod
    def _pairs(links: list) -> Callable[[int, int], float]:
        def pair(k: int, other: int) -> float:
            if abs(k - other) != 1:
                return UNKNOWN_PAIR
            link = links[max(k, other)]
            return link.slowdowns[0] if k < other else link.slowdowns[1]
        return pair

    @staticmethod
    def _splits(links: list) -> dict[int, int]:
        return {k: k - 1 for k, link in enumerate(links) if link is not None and link.split}

    # -- a queue onto its GPUs ------------------------------------------------------------------------
    def plan(self, jobs: list, chains: int) -> list[Chain]:
        """The queue as `chains` chains: longest jobs first each onto the chain that ends soonest, then
        single moves and swaps of jobs while they shorten the longest chain (then all of them)."""
        lanes: list[list] = [[] for _ in range(max(1, chains))]
        ends = [0.0] * len(lanes)
        for j in sorted(jobs, key=lambda j: (-phases(j.profile).wall, j.name)):
            k = ends.index(min(ends))
            lanes[k].append(j)
            ends[k] = self.chain(lanes[k]).makespan_s
        built = [self.chain(lane) if lane else None for lane in lanes]
        best = _score(built)
        for _ in range(4 * len(jobs)):
            found = None
            for cand in _moves(lanes):
                trial = [self.chain(lane) if lane else None for lane in cand]
                score = _score(trial)
                if score < best and (found is None or score < found[0]):
                    found = (score, cand, trial)
            if found is None:
                break
            best, lanes, built = found
        return [c for c in built if c is not None]


def _score(chains: list[Chain | None]) -> tuple[float, float]:
    spans = [c.makespan_s for c in chains if c is not None]
    return (round(max(spans, default=0.0), 3), round(sum(spans), 3))


def _moves(lanes: list[list]):
    """Every lane set one move away: a job to another place (its lane or another), or two jobs swapped."""
    where = [(a, i) for a, lane in enumerate(lanes) for i in range(len(lane))]
    for a, i in where:
        for b in range(len(lanes)):
            for pos in range(len(lanes[b]) + (0 if a == b else 1)):
                if a == b and pos == i:
                    continue
                out = [list(x) for x in lanes]
                job = out[a].pop(i)
                out[b].insert(pos, job)
                yield out
    for n, (a, i) in enumerate(where):
        for b, k in where[n + 1:]:
            out = [list(x) for x in lanes]
            out[a][i], out[b][k] = out[b][k], out[a][i]
            yield out
