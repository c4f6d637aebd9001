"""What a packed sweep may do: `schedule: pack`, `max_slowdown` and the `pack:` block of the spec.

    schedule: pack             # or `radt-ext sweep FILE --executor pack`
    max_slowdown: 1.5          # no job slower than this as it lives it (its wall time in the queue / alone)
    modes: [naive, mps]        # the ways jobs may share a GPU (exclusive, alone, is always allowed)
    pack:
      max_jobs_per_gpu: 4      # 1: one job per GPU at a time; more: one chain per GPU (planner.py)
      memory_headroom_pct: 10  # kept free of the GPU's memory beside the jobs' peaks
      gpu_memory_mib: 81559    # default: read from the store's runs, else from the GPU
      guard: true              # while a group runs, the guard keeps each job within max_slowdown
      trials: true             # pairs nothing measured side by side overlap on trial where that is safe
      cpu_sets: true           # jobs sharing a GPU get disjoint CPU sets of its part of the host
      pairs_from: [pack-pairs] # experiments whose measured pairs and start-ups every plan knows too (e.g. a
                               # sweep of two-job groups, benchmarks/packing/pair_rates.sh): a first pass
                               # runs those within the bound side by side, as a second one would

Each problem is one line naming the field, raised before anything runs; so are the fields that once were
options and changed nothing (`REPLACED`: what took their place).
"""
from __future__ import annotations

from dataclasses import dataclass

from radt_ext.errors import UsageError

SHARING_MODES = ("naive", "mps")  # the modes the planner chooses among for a shared GPU
SCHEDULES = ("pack",)
KEYS = ("max_jobs_per_gpu", "memory_headroom_pct", "gpu_memory_mib", "guard", "trials", "cpu_sets", "pairs_from")
REPLACED = {
    "mps_thread_percentage": "chains set no MPS thread cap; give a workload its own mps: {thread_percentage: N}",
    "model": "no group rests on the contention model alone: pairs are measured side by side, or tried under "
             "the guard (pack.trials)",
}


@dataclass
class PackOptions:
    max_slowdown: float = 1.5
    modes: tuple[str, ...] = SHARING_MODES
    max_jobs_per_gpu: int = 4
    memory_headroom_pct: float = 10.0
    gpu_memory_mib: float | None = None
    scheduled: bool = False  # the spec says schedule: pack (else only --executor pack packs it)
    guard: bool = True  # a guard beside each shared group keeps every job within max_slowdown (collocation/guard.py)
    # pairs nothing measured side by side, both watched by the guard, overlap on trial where a split
    # still keeps both within the bound (chains.py)
    trials: bool = True
    cpu_sets: bool = True  # jobs sharing a GPU get disjoint CPU sets (cpusets.py)
    pairs_from: tuple[str, ...] = ()  # other experiments whose measured pairs and start-ups the plans know


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def max_slowdown(value, where: str = "max_slowdown") -> float:
    if not _number(value) or value < 1 or value > 100:
        raise UsageError(f"{where}: {value!r} is not a bound on slowdown; give a number >= 1 "
                         "(1.5: no job more than 1.5x slower than alone)")
    return float(value)


def sharing_modes(modes: list[str], where: str = "modes") -> tuple[str, ...]:
    """The spec's modes as the planner's choices: exclusive dropped (always allowed), mig refused."""
    out = []
    for m in modes:
        if m == "exclusive":
            continue
        if m not in SHARING_MODES:
            raise UsageError(f"{where}: mode {m!r} cannot be packed; schedule: pack chooses among "
                             f"exclusive, {', '.join(SHARING_MODES)}")
        if m not in out:
            out.append(m)
    return tuple(out) or SHARING_MODES


def parse(data: dict, modes: list[str], source: str) -> PackOptions | None:
    """The options of a spec's top-level mapping, or None when it does not ask for packing."""
    schedule = data.get("schedule")
    if schedule is not None and schedule not in SCHEDULES:
        raise UsageError(f"{source}: schedule: {schedule!r} is not a schedule; use one of {', '.join(SCHEDULES)}")
    block = data.get("pack")
    if schedule is None and block is None and "max_slowdown" not in data:
        return None
    opts = PackOptions(modes=sharing_modes(modes, f"{source}: modes"), scheduled=schedule == "pack")
    if "max_slowdown" in data:
        opts.max_slowdown = max_slowdown(data["max_slowdown"], f"{source}: max_slowdown")
    if block is None:
        return opts
    if not isinstance(block, dict):
        raise UsageError(f"{source}: pack: expected a mapping such as {{max_jobs_per_gpu: 4}}")
    for key, value in block.items():
        where = f"{source}: pack.{key}"
        if key in REPLACED:
            raise UsageError(f"{where}: no longer an option ({REPLACED[key]}); remove it")
        if key not in KEYS:
            raise UsageError(f"{where}: unknown field; use one of {', '.join(KEYS)}")
        if key == "max_jobs_per_gpu":
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 48:
                raise UsageError(f"{where}: expected a whole number 1..48, got {value!r}")
            opts.max_jobs_per_gpu = value
        elif key == "memory_headroom_pct":
            if not _number(value) or not 0 <= value < 100:
                raise UsageError(f"{where}: expected a percentage 0..99, got {value!r}")
            opts.memory_headroom_pct = float(value)
        elif key == "pairs_from":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
                raise UsageError(f"{where}: expected experiment names, e.g. [pack-pairs-b], got {value!r}")
            opts.pairs_from = tuple(n.strip() for n in names)
        elif key in ("guard", "trials", "cpu_sets"):
            if not isinstance(value, bool):
                raise UsageError(f"{where}: expected true or false, got {value!r}")
            setattr(opts, key, value)
        else:  # gpu_memory_mib
            if not _number(value) or value <= 0:
                raise UsageError(f"{where}: expected the GPU's memory in MiB (e.g. 81559), got {value!r}")
            opts.gpu_memory_mib = float(value)
    return opts
