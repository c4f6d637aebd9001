"""Predicted slowdown of jobs whose active phases share one GPU, from their exclusive profiles.

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

- a start-up beside an active phase (imports, the CUDA context, autotuning): BOOT where nothing measured
  it; BOOT_LIGHT for a light job paced by its kernels' launches (SM active < LIGHT_SM, its GPU busy
  LAUNCH_GAP more than that: small kernels back to back), which waits on every kernel and driver call of
  the start-up beside it (a job issuing small GEMMs did 3.46x less work beside a start-up on an H200), so
  that it is planned with no start-up beside it until the pair is measured.

These are only what a trial is expected to cost (chains.py): a pair measured side by side replaces them,
and the guard splits a trial that turns out worse.
"""
from __future__ import annotations

from radt_ext.packing.profiles import Profile


def _frac(pct: float | None) -> float:
    return max(0.0, min(1.0, (pct or 0.0) / 100.0))


def busy(p: Profile) -> float:
    return _frac(p.busy_pct if p.busy_pct is not None else p.sm_pct)


def pressure(p: Profile) -> float:
    """The share of the resource the job uses most (SM or DRAM), for MPS."""
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


BOOT = 1.15
BOOT_LIGHT = 3.5
LIGHT_SM = 0.2


def boot_slowdown(p: Profile, mode: str) -> float:
    """p's slowdown in its active phase while another job starts up beside it (see the module's account)."""
    if mode == "exclusive" or p.sm_pct is None:
        return 1.0
    sm = _frac(p.sm_pct)
    return BOOT_LIGHT if sm < LIGHT_SM and busy(p) - sm >= LAUNCH_GAP else BOOT


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
