"""Disjoint CPU sets for the jobs that share a GPU: loader-bound jobs side by side fight for the host's
cores, so each job of a shared group gets CPUs of its own.

The CPUs this process may use are cut into one contiguous block per GPU of the pool (in the pool's
order), and a GPU's block among its group's jobs in proportion to each one's CPU use alone (its
profile's `proc_avg_cpu_pct`, at least one CPU's worth), each at least one CPU. A block with fewer CPUs
than jobs is not cut: the jobs run unpinned, and say why. The set is applied to the job's process as
soon as it started (os.sched_setaffinity on each of its threads and processes; what it starts later
inherits it).

CPU lists are hostsettings/cpus.py's (`text`: the 0-3,8 form; `host_cpus`: what this process may use).
"""
from __future__ import annotations

import os

from radt_ext.hostsettings.cpus import allowed as host_cpus, cpulist as text  # noqa: F401 - text: for callers


def gpu_block(device: str, pool: list[str], cpus: list[int]) -> list[int]:
    """The CPUs of one GPU of the pool: its contiguous share of `cpus` (all of them for a device outside
    the pool)."""
    if device not in pool or len(pool) < 2:
        return list(cpus)
    i, n = pool.index(device), len(pool)
    return cpus[len(cpus) * i // n:len(cpus) * (i + 1) // n]


def split(block: list[int], weights: list[float]) -> list[list[int]] | None:
    """`block` cut into one contiguous set per job, sized in proportion to `weights` (largest remainder),
    each at least one CPU; None where the block has fewer CPUs than jobs."""
    n = len(weights)
    if n == 0 or len(block) < n:
        return None
    spare = len(block) - n  # one CPU each first, the rest by weight
    total = sum(weights)
    shares = [spare * w / total for w in weights]
    sizes = [1 + int(s) for s in shares]
    left = len(block) - sum(sizes)
    for i in sorted(range(n), key=lambda k: -(shares[k] - int(shares[k])))[:left]:
        sizes[i] += 1
    out, at = [], 0
    for size in sizes:
        out.append(block[at:at + size])
        at += size
    return out


def assign(device: str, pool: list[str], cpu_pcts: list[float | None],
           cpus: list[int] | None = None) -> tuple[list[list[int]] | None, str]:
    """(each job's CPUs, or None, and why not)."""
    block = gpu_block(device, pool, host_cpus() if cpus is None else cpus)
    sets = split(block, [max(1.0, (c or 0.0) / 100.0) for c in cpu_pcts])
    if sets is None:
        return None, (f"not pinned: {len(block)} CPU(s) for GPU {device}'s part of the host, "
                      f"{len(cpu_pcts)} jobs")
    return sets, ""


def apply(pids: list[int], cpus: list[int]) -> list[int]:
    """Pin every thread of these processes to `cpus`; returns the CPUs the first process then has (empty
    where it is gone)."""
    for pid in pids:
        try:
            tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            tasks = [pid]
        for tid in tasks:
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:  # it ended meanwhile
                continue
    try:
        return sorted(os.sched_getaffinity(pids[0])) if pids else []
    except OSError:
        return []
