"""Predicted slowdown and energy of jobs sharing one GPU, from their exclusive profiles.

A contention model, small enough to check by hand (docs/collocation.md, "Packing a queue"):

- naive (time-slicing): kernels of different processes do not run at the same time, so each other
  job's busy share b_j (NVML utilization; SM active where that was not recorded) is time this job
  waits: slowdown_i = max(1 + sum_{j != i} b_j, sum_j b_j).
- mps: kernels run side by side and contend for SMs and memory bandwidth; each other job takes
  c_j = max(SM active_j, DRAM active_j) of the resource it uses most:
  slowdown_i = max(1 + sum_{j != i} c_j, sum_j SM active_j, sum_j DRAM active_j).
- launch-bound jobs (short kernels): a job whose SMs are mostly idle alone (SM active < LAUNCH_SM)
  while its GPU is busy LAUNCH_GAP more than that (small, short kernels back to back) or one of its CPU
  threads is busy issuing them (CPU >= LAUNCH_CPU % of a core) is paced by how soon each kernel starts.
  Beside another process's kernels it waits until they free the SMs, so what slows it is how fully and
  how often the others hold them: slowdown_i >= 1 + BLOCK_GAIN * sum_{j != i} SM active_j^2 * b_j
  (either mode). BLOCK_GAIN is set from a matmul of side 1024 beside a CNN script under MPS on an H200
  (3.26 measured, 1.43 by the formulas above) and keeps three ResNet-18 at batch 128 (1.06-1.14
  measured) together.
- the host's CPUs: the jobs sharing a GPU share its part of the host's CPUs (the host's logical CPUs
  over the pool's GPUs): slowdown >= sum_j CPU_j / those CPUs (data-loader-heavy jobs).
- when: jobs of a group start together, and a job is slowed only while another one uses the GPU.
  Each job's active phase and busy span are known from its start (profiles.py); the others' are
  widened by MARGIN_S + MARGIN_SHARE of their busy start (start-ups vary, more so beside other jobs).
  Job i's active phase is cut into pieces (PIECE_S, and where another job's state changes); in each
  the model above runs over the jobs there, each with its active-phase figures, or, when only busy
  (warm-up epochs, evaluation), with what its exclusive run's GPU did then (the busiest within the
  margin; its average outside the active phase where no series was read); s_i = 1 + the pieces'
  (s - 1) weighted by their length over the active phase. The phases are stretched by the slowdowns and lined up again (a few
  rounds). Without spans (older runs), everything overlaps: the model above.
- time: only a job's active phase (d_i) is slowed; the rest of its run u_i (start-up: interpreter,
  imports, data, model; wind-down: final evaluation, exit) barely uses the GPU and overlaps the others'
  for free: wall_i = u_i + d_i s_i.
- energy, over the whole run (what a job's attributed energy measures): a job's dynamic energy is what
  it drew alone above the GPU's idle power, in the active phase (P_i) and outside it (U_i); the idle
  power is paid over its predicted wall time and shared evenly by the n jobs on the GPU:
  E_i = (P_i - P_idle) d_i + (U_i - P_idle) u_i + P_idle (u_i + d_i s_i) / n. Alone: P_i d_i + U_i u_i.

A measured slowdown of the same group (or of the closest measured pair, scaled to this pair's
overlap) replaces the model's (see planner.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from radt_ext.packing.profiles import Profile


def _frac(pct: float | None) -> float:
    return max(0.0, min(1.0, (pct or 0.0) / 100.0))


def busy(p: Profile) -> float:
    return _frac(p.busy_pct if p.busy_pct is not None else p.sm_pct)


def pressure(p: Profile) -> float:
    """The share of the resource the job uses most (SM or DRAM), for MPS and for the packing order."""
    return max(_frac(p.sm_pct), _frac(p.dram_pct))


LAUNCH_SM = 0.5
LAUNCH_GAP = 0.15
LAUNCH_CPU = 80.0
BLOCK_GAIN = 12.0


def launch_bound(p: Profile) -> bool:
    """Paced by how soon each of its short kernels starts (see the module's account)."""
    if p.sm_pct is None:
        return False
    sm = _frac(p.sm_pct)
    return sm < LAUNCH_SM and (busy(p) - sm >= LAUNCH_GAP or (p.cpu_pct or 0.0) >= LAUNCH_CPU)


def blocking(p: Profile) -> float:
    """How fully and how often the job's kernels hold the SMs: SM active^2 x busy."""
    return _frac(p.sm_pct) ** 2 * busy(p)


def slowdowns(profiles: list[Profile], mode: str, cpus: float | None = None) -> list[float]:
    """cpus: the host's logical CPUs this GPU's jobs share (None: not counted)."""
    if len(profiles) < 2 or mode == "exclusive":
        return [1.0] * len(profiles)
    if mode == "naive":
        b = [busy(p) for p in profiles]
        total = sum(b)
        out = [max(1.0 + total - x, total) for x in b]
    elif mode == "mps":
        c = [pressure(p) for p in profiles]
        floor = max(1.0, sum(_frac(p.sm_pct) for p in profiles), sum(_frac(p.dram_pct) for p in profiles))
        out = [max(1.0 + sum(c) - x, floor) for x in c]
    else:
        raise ValueError(f"no model for mode {mode!r}")
    held = [blocking(p) for p in profiles]
    for i, p in enumerate(profiles):
        if launch_bound(p):
            out[i] = max(out[i], 1.0 + BLOCK_GAIN * (sum(held) - held[i]))
    if cpus:
        cpu = sum((p.cpu_pct or 0.0) for p in profiles) / 100.0 / cpus
        out = [max(x, cpu) for x in out]
    return out


MARGIN_S = 2.0
MARGIN_SHARE = 0.1
ROUNDS = 4
PIECE_S = 0.5  # the active phase is looked at in pieces this long (and wherever another job's state changes)


@dataclass
class Timeline:
    slowdowns: list[float]
    overlaps: list[float]  # the share of each job's active phase another job keeps the GPU busy in
    meets: list[list[int]]  # for each job, the others busy beside its active phase
    sm_demand: list[float]  # for each job, the most SM activity (fraction) of the jobs in their active phases during its own


def _spans(p: Profile, slowdown: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """A job's active phase and busy span from its start, widened by how much its start may move."""
    (a0, a1), (b0, b1) = p.active_window(slowdown), p.busy_window(slowdown)
    margin = MARGIN_S + MARGIN_SHARE * b0
    return (a0 - margin, a1 + margin), (b0 - margin, b1 + margin)


def _beside(i: int, profiles: list[Profile], s: list[float], mode: str,
            cpus: float | None = None) -> tuple[float, float, list[int], float]:
    """Job i's slowdown, the share of its active phase with another job busy, those jobs, and the most
    SM activity of the jobs in their active phases at once during it (a fraction of the GPU's SMs): its
    active phase cut into pieces; in each, every other job is active (its active-phase figures), busy
    outside its active phase (what its exclusive run's GPU did then, profiles.Profile.outside_at), or
    idle; the model's slowdown in each piece weighted by the piece's length."""
    a0, a1 = profiles[i].active_window(s[i])
    own_sm = _frac(profiles[i].sm_pct)
    if a1 <= a0:
        return 1.0, 0.0, [], own_sm
    others = {}
    for j, p in enumerate(profiles):
        if j != i:
            (x0, x1), (y0, y1) = _spans(p, s[j])
            start, end = p.active_window(s[j])
            others[j] = (x0, x1, y0, y1, start, (end - start) - (p.duration_s or 0.0))
    edges = {x for o in others.values() for x in o[:4] if a0 < x < a1}
    steps = int((a1 - a0) // PIECE_S)
    cuts = sorted({a0, a1, *edges, *(a0 + PIECE_S * k for k in range(1, steps + 1) if a0 + PIECE_S * k < a1)})
    excess = covered = 0.0
    demand = own_sm
    meets: set[int] = set()
    for lo, hi in zip(cuts, cuts[1:]):
        mid, present = (lo + hi) / 2, []
        active_sm = own_sm
        for j, (x0, x1, y0, y1, start, stretch) in others.items():
            p = profiles[j]
            if x0 <= mid < x1:
                present.append(p)
                active_sm += _frac(p.sm_pct)
            elif y0 <= mid < y1:
                own = mid if mid < start else mid - stretch  # after its active phase, its own clock lags
                there = p.outside_at(own, start - x0)  # its start may move by the margin: the busiest then
                if there is None:
                    continue
                present.append(there)
            else:
                continue
            meets.add(j)
        if present:
            excess += (slowdowns([profiles[i], *present], mode, cpus)[0] - 1.0) * (hi - lo)
            covered += hi - lo
            demand = max(demand, active_sm)
    return 1.0 + excess / (a1 - a0), covered / (a1 - a0), sorted(meets), demand


def timeline(profiles: list[Profile], mode: str, cpus: float | None = None) -> Timeline:
    """Each job's slowdown when the group's jobs start together (see the module's `when`); cpus: the
    host's CPUs the group shares (None: not counted)."""
    n = len(profiles)
    if n < 2 or mode == "exclusive":
        return Timeline([1.0] * n, [0.0] * n, [[] for _ in range(n)], [_frac(p.sm_pct) for p in profiles])
    s = [1.0] * n
    for _ in range(ROUNDS):  # slowed active phases last longer and meet more: find them again
        found = [_beside(i, profiles, s, mode, cpus) for i in range(n)]
        s = [x[0] for x in found]
    return Timeline(s, [x[1] for x in found], [x[2] for x in found], [x[3] for x in found])


def thread_percentages(profiles: list[Profile], setting: str = "auto",
                       sm_demand: list[float] | None = None) -> list[int | None]:
    """CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per job. auto: none while the SM activity of the jobs in their
    active phases beside its own fits the GPU (a limit would slow its bursts, and it holds for the
    whole run, so a neighbour's warm-up does not set it); when it is oversubscribed, the job's share
    of that demand (5 % steps, >= 10).
    sm_demand: each job's (Timeline.sm_demand; default: all jobs' active phases at once)."""
    n = len(profiles)
    if setting == "none":
        return [None] * n
    if setting != "auto":
        return [int(setting)] * n
    sm = [_frac(p.sm_pct) for p in profiles]
    demand = sm_demand if sm_demand is not None else [sum(sm)] * n
    if n < 2:
        return [None] * n
    return [min(100, max(10, 5 * math.ceil(20 * sm[i] / demand[i]))) if demand[i] > 1.0 else None for i in range(n)]


def energy(p: Profile, slowdown: float, sharing: int, idle_power_w: float | None) -> float | None:
    """A job's predicted GPU energy over its whole run when it shares the GPU with `sharing` jobs in all
    (itself included)."""
    alone = p.alone_energy_j
    if alone is None or not p.duration_s:
        return None
    start_w = p.outside_power_w(idle_power_w)
    if sharing < 2 or idle_power_w is None or p.power_w is None or start_w is None:
        return alone
    idle = min(idle_power_w, p.power_w)
    dynamic = (p.power_w - idle) * p.duration_s + max(0.0, start_w - idle) * p.outside_s
    return dynamic + idle * p.wall_s(slowdown) / sharing
