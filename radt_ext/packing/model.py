"""Predicted slowdown and energy of jobs sharing one GPU, from their exclusive profiles.

A contention model, small enough to check by hand (docs/collocation.md, "Packing a queue"):

- naive (time-slicing): kernels of different processes do not run at the same time, so each other
  job's busy share b_j (NVML utilization; SM active where that was not recorded) is time this job
  waits: slowdown_i = max(1 + sum_{j != i} b_j, sum_j b_j).
- mps: kernels run side by side and contend for SMs and memory bandwidth; each other job takes
  c_j = max(SM active_j, DRAM active_j) of the resource it uses most:
  slowdown_i = max(1 + sum_{j != i} c_j, sum_j SM active_j, sum_j DRAM active_j).
- time: only a job's active phase (d_i) is slowed; the rest of its run u_i (start-up: interpreter,
  imports, data, model; wind-down: final evaluation, exit) barely uses the GPU and overlaps the others'
  for free: wall_i = u_i + d_i s_i.
- energy, over the whole run (what a job's attributed energy measures): a job's dynamic energy is what
  it drew alone above the GPU's idle power, in the active phase (P_i) and outside it (U_i); the idle
  power is paid over its predicted wall time and shared evenly by the n jobs on the GPU:
  E_i = (P_i - P_idle) d_i + (U_i - P_idle) u_i + P_idle (u_i + d_i s_i) / n. Alone: P_i d_i + U_i u_i.

A measured slowdown of the same group (or of the closest measured pair) replaces the model's
(see planner.py).
"""
from __future__ import annotations

import math

from radt_ext.packing.profiles import Profile


def _frac(pct: float | None) -> float:
    return max(0.0, min(1.0, (pct or 0.0) / 100.0))


def busy(p: Profile) -> float:
    return _frac(p.busy_pct if p.busy_pct is not None else p.sm_pct)


def pressure(p: Profile) -> float:
    """The share of the resource the job uses most (SM or DRAM), for MPS and for the packing order."""
    return max(_frac(p.sm_pct), _frac(p.dram_pct))


def slowdowns(profiles: list[Profile], mode: str) -> list[float]:
    if len(profiles) < 2 or mode == "exclusive":
        return [1.0] * len(profiles)
    if mode == "naive":
        b = [busy(p) for p in profiles]
        total = sum(b)
        return [max(1.0 + total - x, total) for x in b]
    if mode == "mps":
        c = [pressure(p) for p in profiles]
        floor = max(1.0, sum(_frac(p.sm_pct) for p in profiles), sum(_frac(p.dram_pct) for p in profiles))
        return [max(1.0 + sum(c) - x, floor) for x in c]
    raise ValueError(f"no model for mode {mode!r}")


def thread_percentages(profiles: list[Profile], setting: str = "auto") -> list[int | None]:
    """CUDA_MPS_ACTIVE_THREAD_PERCENTAGE per job. auto: none while the SMs' demand fits (a limit would
    slow a job's bursts); when it is oversubscribed, each job its share of the demand (5 % steps, >= 10)."""
    if setting == "none":
        return [None] * len(profiles)
    if setting != "auto":
        return [int(setting)] * len(profiles)
    sm = [_frac(p.sm_pct) for p in profiles]
    if len(profiles) < 2 or sum(sm) <= 1.0:
        return [None] * len(profiles)
    return [min(100, max(10, 5 * math.ceil(20 * x / sum(sm)))) for x in sm]


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
