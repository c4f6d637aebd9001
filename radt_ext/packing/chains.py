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

A start-up is not free: its imports, CUDA context and autotuning slow the active phase beside it by the
link's `boot` (measured where the store has the pair, tag `collocation.startup_pairs`, else
model.boot_slowdown), and only as much of it lies beside that active phase as the earlier job's budget
pays for; none where `boot` is beyond the bound. A pair measured beyond the bound, side by side or as a
start-up, is never repeated: its later job's active phase (or its start-up) begins where the earlier
one's active phase ends.

A job's budget is what the bound leaves it, planned at PLAN_SHARE of the bound (b): (1 - 1/b) x its
active phase, the seconds a job that stops on time can lose of its work and keep its rate within b (a job
that stops on work could lose (b - 1) x its wall, never less). A measured pair within the bound may spend
all of both jobs' budgets, so that two whose slowdowns are small run side by side for their whole
length; a trial spends half of each (one for each end of the job); where the play puts a job beyond
PLAN_SHARE of the bound its links step down: whole budget, half, its start-up beside only, nothing beside.

`simulate` plays a chain forward from the jobs' phases alone (start-up, active phase, wind-down), the
pair slowdowns, the start-ups' cost and the guard's splits; with `chain=True` it starts the jobs as the
group runner does (collocation/group.py): job k at its offset after job k-1's actual start (or when k-1
ends, if sooner), with `work_left` not before job k-1 has at most that much of its active phase to go (the
plan's own play at k's start, `Chain.work_left`: where the guard follows k-1's progress the runner waits for
it too), and never before job k-2 has ended, so at most two of a chain's jobs live at once. The
planner predicts with it, and tests and benchmarks/packing/simulate_long.py replay measured queues
through it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
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


def lived(played: "Played", ph: list[Phases]) -> list[float]:
    """Each job's slowdown as it would live it whichever way it stops: on work (its wall time over its wall
    alone) or on time (its active phase's stretch, each second of which is work lost), the larger."""
    out = []
    for s, e, a0, a1, h in zip(played.starts, played.ends, played.active_from, played.active_to, ph):
        wall = (e - s) / h.wall if h.wall else 1.0
        stretch = (a1 - a0) / h.active if h.active and a0 is not None and a1 is not None else 1.0
        out.append(max(wall, stretch))
    return out


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
    boot: float = 1.0  # the earlier job's slowdown while the later one starts up beside its active phase
    boot_s: float | None = None  # seconds of the later job's start-up beside that active phase (None: all of it)
    boot_evidence: str = ""  # the group run that measured `boot`
    share: float = 1.0  # the share of each job's budget a measured overlap may spend
    why: str = ""  # why the link is no closer than it is

    def boot_text(self) -> str:
        """How much of the later job's start-up lies beside the earlier one's active phase, at what cost."""
        if self.boot_s == 0.0:
            return "its start-up after the active phase of the job before"
        part = "its start-up" if self.boot_s is None else f"{self.boot_s:.1f} s of its start-up"
        cost = "" if self.boot == 1.0 else \
            f" at {self.boot:.2f} ({f'run {self.boot_evidence[:8]}' if self.boot_evidence else 'model'})"
        return f"{part} beside the job before{cost}"

    def text(self) -> str:
        why = f" ({self.why})" if self.why else ""
        if self.basis == "measured":
            return (f"measured (run {self.evidence[:8]}: {self.slowdowns[0]:.2f}/{self.slowdowns[1]:.2f}), "
                    f"{self.overlap_s:.1f} s side by side; {self.boot_text()}")
        if self.basis == "trial":
            return (f"trial, {self.overlap_s:.1f} s side by side under the guard (model "
                    f"{self.slowdowns[0]:.2f}/{self.slowdowns[1]:.2f}); {self.boot_text()}")
        if self.basis == "after":
            return f"after the job before ({self.why or 'memory'})"
        return self.boot_text() + why


@dataclass
class Played:
    starts: list[float]
    active_from: list[float | None]
    active_to: list[float | None]
    ends: list[float]
    paused_s: list[float] = field(default_factory=list)
    # per job: the seconds (alone) of the job before's active phase still to go when it started (None: the
    # job before was not in its active phase then)
    left_before: list[float | None] = field(default_factory=list)


def simulate(ph: list[Phases], starts: list[float], pair: Callable[[int, int], float],
             splits: dict[int, int] | None = None, boot: Callable[[int, int], float] | None = None,
             chain: bool = False, work_left: list[float | None] | None = None) -> Played:
    """Play jobs forward from their start times: start-up and wind-down at their own pace, active phases
    slowed by each other active phase beside them (pair(k, other): k's slowdown beside other) and by each
    start-up beside them (boot(k, other): k's slowdown while other starts up), a job in `splits`
    (later -> earlier) paused once it has been active beside the earlier one for STEADY_S, until the
    earlier one's active phase ends. chain: `starts` are the plan, each job started as the group runner
    starts a chain's jobs (see the module); with `work_left`, job k also waits until job k-1 has at most
    work_left[k] s (alone) of its active phase to go (None: its offset only), as the runner does where it
    follows job k-1's progress."""
    n, splits = len(ph), splits or {}
    phase, left = ["wait"] * n, [0.0] * n
    a0, a1, ends, began = [None] * n, [None] * n, [0.0] * n, [None] * n
    beside, paused, paused_s = [0.0] * n, [False] * n, [0.0] * n
    left_before: list[float | None] = [None] * n
    gate = work_left if chain and work_left else [None] * n

    def worked(k: int) -> bool:
        """Whether job k-1 has done what job k waits for (its active phase down to gate[k] s)."""
        if k == 0 or gate[k] is None or phase[k - 1] in ("tail", "done"):
            return True
        return phase[k - 1] == "active" and left[k - 1] <= gate[k] + 1e-6

    def due(k: int) -> float | None:
        """When job k may start (None: not known yet)."""
        if not chain or k == 0:
            return starts[k]
        if k >= 2 and phase[k - 2] != "done":
            return None
        if phase[k - 1] == "done":
            return t
        if began[k - 1] is None:
            return None
        return began[k - 1] + starts[k] - starts[k - 1]

    t = 0.0
    for _ in range(100 * n + 100):
        for k in range(n):  # phases that begin or end now
            when = due(k) if phase[k] == "wait" else None
            if when is not None and t >= when - 1e-9 and worked(k):
                if k and phase[k - 1] == "active":
                    left_before[k] = left[k - 1]
                phase[k], left[k], began[k] = "startup", ph[k].startup, t
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
        booting = [k for k in range(n) if phase[k] == "startup"]
        rate = [0.0] * n
        for k in range(n):
            if paused[k] or phase[k] in ("wait", "done"):
                continue
            x = 1.0
            if phase[k] == "active":
                for o in active:
                    if o != k:
                        x *= pair(k, o)
                if boot is not None:
                    for o in booting:
                        x *= boot(k, o)
            rate[k] = 1.0 / x
        steps = [left[k] / rate[k] for k in range(n) if rate[k] > 0]
        steps += [w - t for w in (due(k) for k in range(n) if phase[k] == "wait") if w is not None and w > t]
        steps += [(left[k - 1] - gate[k]) / rate[k - 1] for k in range(1, n)
                  if phase[k] == "wait" and gate[k] is not None and phase[k - 1] == "active" and rate[k - 1] > 0
                  and left[k - 1] > gate[k] + 1e-6]
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
    return Played([b if b is not None else s for b, s in zip(began, starts)], a0, a1, ends, paused_s, left_before)


@dataclass
class Chain:
    jobs: list  # planner.Job, in order
    links: list[Link | None]  # links[k]: how job k follows job k-1 (None for the first)
    starts: list[float]  # each job's planned start from the chain's start
    walls: list[float]  # predicted wall times
    slowdowns: list[float]  # predicted wall time / wall time alone
    # per job: the seconds (alone) of the job before's active phase still to go at its planned start (None:
    # its offset only); the runner waits for that much of it as well as for the offset
    work_left: list[float | None] = field(default_factory=list)

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

    def boot(self, active: Profile, starting: Profile) -> tuple[float, str]:
        """`active`'s slowdown while `starting` starts up beside it in this mode: the newest measured, else
        the model's (run id, or "" for the model)."""
        for m in self.k.boots:  # newest first
            if m.mode == self.mode and m.active_key == active.key and m.starting_key == starting.key:
                return m.slowdown, m.run_id
        return model.boot_slowdown(active, self.mode), ""

    def link(self, i, j) -> Link:
        key = (i.name, j.name)
        if key not in self._links:
            self._links[key] = self._link(i.profile, j.profile)
        return self._links[key]

    def _link(self, pi: Profile, pj: Profile, share: float = 1.0) -> Link:
        """share: the part of each job's budget the link may spend (a trial: half, whatever `share`)."""
        if self.room is not None and (pi.mem_mib is None or pj.mem_mib is None or pi.mem_mib + pj.mem_mib > self.room):
            return Link("after", why="memory")
        hi, hj = phases(pi), phases(pj)
        bi, bj = budget_s(hi, self.bound), budget_s(hj, self.bound)
        start_up, boot_cost = self._start_up(pi, pj, share)
        if start_up.boot_s is not None:  # a start-up not wholly beside: no active phases side by side either
            return start_up
        boot = dict(boot=start_up.boot, boot_evidence=start_up.boot_evidence)
        found = self.measured(pi, pj)
        if found is not None:
            xi, xj, run = found
            if max(xi, xj) > self.bound:
                start_up.why = f"measured beyond the bound side by side (run {run[:8]}: {xi:.2f}/{xj:.2f})"
                return start_up
            if 1.0 + xi / xj - xi <= 0.05:  # side by side they do no more than one after the other
                return start_up
            gi, gj = share * bi - boot_cost, share * bj
            r = hi.active
            if xi > 1.0:
                r = min(r, gi / (xi - 1.0))
            if xj > 1.0:
                r = min(r, gj / (xi * (1.0 - 1.0 / xj)))
            return Link("measured", max(0.0, r), (xi, xj), run, share=share, **boot)
        xi, xj = start_up.slowdowns
        gi, gj = bi / 2 - boot_cost, bj / 2
        if self.trials and pi.throughput and pj.throughput and gi >= STEADY_S:
            r = min(hi.active - STEADY_S, gj - STEADY_S)
            if r >= MIN_TRIAL_S:
                return Link("trial", r, (xi, xj), split=max(xi, xj) > self.bound, share=0.5, **boot)
        return start_up

    def _start_up(self, pi: Profile, pj: Profile, share: float) -> tuple[Link, float]:
        """The later job's start-up beside the earlier one's active phase, as much of it as `share` of the
        earlier one's budget pays for (none where it costs beyond the bound), and what it costs."""
        hi, hj = phases(pi), phases(pj)
        x, run = self.boot(pi, pj)
        found = self.measured(pi, pj)
        link = Link("start-up", 0.0, found[:2] if found else tuple(model.slowdowns([pi, pj], self.mode)),
                    found[2] if found else "", boot=x, boot_evidence=run, share=share)
        # o s of the later one's start-up beside cost the earlier o (1 - 1/x) of wall; o at most its active phase at x
        cost = min(hj.startup, hi.active * x) * (1.0 - 1.0 / x) if x > 1.0 else 0.0
        budget = share * budget_s(hi, self.bound)
        if x > self.bound:
            link.boot_s, link.why = 0.0, f"its start-up {'measured' if run else 'modelled'} at {x:.2f} beside it"
            return link, 0.0
        if cost > budget:
            link.boot_s, link.why = budget / (1.0 - 1.0 / x), "the rest of its start-up after: the budget"
            return link, budget
        return link, cost

    def _weaker(self, link: Link, pi: Profile, pj: Profile) -> Link | None:
        """The next link closer to one after the other: a measured overlap or a start-up on half the
        budgets, then the start-up beside only, then nothing beside; None where nothing is beside already."""
        if link.basis == "after" or (link.basis == "start-up" and link.boot_s == 0.0):
            return None
        if link.share > 0.5 and link.basis in ("measured", "start-up"):
            return self._link(pi, pj, share=0.5)
        if link.basis in ("measured", "trial"):
            weaker, _ = self._start_up(pi, pj, 0.5)
            weaker.why = "its sharing beyond its budget in the plan"
            return weaker
        return replace(link, boot_s=0.0, why="its start-up beside beyond the budget in the plan")

    def chain(self, jobs: list) -> Chain:
        key = tuple(j.name for j in jobs)
        if key not in self._chains:
            self._chains[key] = self._chain(jobs)
        return self._chains[key]

    def _chain(self, jobs: list) -> Chain:
        """Start times that give each link its overlap, as the runner starts a chain's jobs (never job k
        before job k-2 has ended); where the play puts a job beyond PLAN_SHARE of the bound, its links
        step down (`_weaker`)."""
        links = [None] + [self.link(a, b) for a, b in zip(jobs, jobs[1:])]
        ph = [phases(j.profile) for j in jobs]
        for _ in range(4 * len(jobs) + 1):
            played = self._play(jobs, ph, links)
            slow = [(e - s) / h.wall if h.wall else 1.0 for s, e, h in zip(played.starts, played.ends, ph)]
            over = [k for k, x in enumerate(lived(played, ph)) if x > PLAN_SHARE * self.bound + 1e-6]
            weaker = {k2: self._weaker(links[k2], jobs[k2 - 1].profile, jobs[k2].profile)
                      for k in over for k2 in (k, k + 1) if 0 < k2 < len(jobs)}
            weaker = {k2: w for k2, w in weaker.items() if w is not None}
            if not weaker:
                break
            for k2, w in weaker.items():
                links[k2] = w
        walls = [e - s for s, e in zip(played.starts, played.ends)]
        return Chain(list(jobs), links, played.starts, walls, slow, list(played.left_before))

    def _play(self, jobs: list, ph: list[Phases], links: list) -> Played:
        starts = [0.0]
        for k in range(1, len(jobs)):
            before = self.play(ph[:k], starts, links[:k])
            link = links[k]
            if link.basis == "after":
                start = before.ends[k - 1]
            else:
                # its start-up (`beside` s of it) ends where the job before has r s of its active phase
                # left; o s of it lie beside that active phase at x (at most that active phase, at x)
                x = max(link.boot, 1.0)
                beside = ph[k].startup if link.boot_s is None else min(link.boot_s, ph[k].startup)
                active = before.active_to[k - 1] - before.active_from[k - 1] - link.overlap_s
                o = min(beside, max(0.0, active) * x)
                start = before.active_to[k - 1] - link.overlap_s - o / x - (beside - o)
                if k >= 2:  # the runner starts job k only once job k-2 has ended
                    start = max(start, before.ends[k - 2])
            starts.append(max(starts[-1], start))
        return self.play(ph, starts, links)

    @classmethod
    def play(cls, ph: list[Phases], starts: list[float], links: list, pair=None) -> Played:
        """The chain as the runner plays it, at the links' slowdowns (or `pair`'s, where given)."""
        return simulate(ph, starts, pair or cls._pairs(links), cls._splits(links), cls._boots(links), chain=True)

    @staticmethod
    def _pairs(links: list) -> Callable[[int, int], float]:
        def pair(k: int, other: int) -> float:
            if abs(k - other) != 1:
                return UNKNOWN_PAIR
            link = links[max(k, other)]
            return link.slowdowns[0] if k < other else link.slowdowns[1]
        return pair

    @staticmethod
    def _boots(links: list) -> Callable[[int, int], float]:
        def boot(k: int, other: int) -> float:
            return links[other].boot if other == k + 1 and links[other] is not None else 1.0
        return boot

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
