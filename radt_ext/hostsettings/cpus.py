"""`cpus`: the CPUs a variant's workloads run on. A count (`2`) or CPU ids (`[0, 1]`, `"0-3,8"`).

The workload's process is pinned before it becomes the workload (launch.py), so every process it starts
inherits the CPUs. A count takes CPUs near the variant's GPU where NVML says which those are, else the
first allowed ones, preferring CPUs no other running variant of this sweep holds.
"""
from __future__ import annotations

import os
import threading

from radt_ext.hostsettings.base import Applied, Where

KEY = "cpus"
SCOPE = "process"
_held: dict[int, int] = {}  # CPU -> how many running variants of this process hold it
_lock = threading.Lock()


def cpulist(cpus) -> str:
    """Linux's CPU-list form of a set: 0-3,8."""
    cpus, out, i = sorted(set(cpus)), [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def parse_cpulist(text: str) -> list[int]:
    """0-3,8 → [0, 1, 2, 3, 8] (ValueError: one line)."""
    out: list[int] = []
    for part in str(text).replace(" ", "").split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()) or (high and int(high) < int(low)):
            raise ValueError(f"{text!r} is not a CPU list such as 0-3,8")
        out += range(int(low), int(high or low) + 1)
    return sorted(set(out))


def parse(raw) -> str:
    """A count → "2"; CPU ids → "[0-1]"."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise ValueError(f"a count of {raw} CPUs; give 1 or more, or CPU ids as a list in the list, e.g. [[0, 1]]")
        return str(raw)
    if isinstance(raw, list) and raw and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in raw):
        return f"[{cpulist(raw)}]"
    if isinstance(raw, str):
        return f"[{cpulist(parse_cpulist(raw))}]"
    raise ValueError(f"expected a count of CPUs or a list of CPU ids, got {raw!r}")


def _ids(value: str) -> list[int] | None:
    return parse_cpulist(value[1:-1]) if value.startswith("[") else None


def allowed() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def check(value: str, where: Where) -> str | None:
    mine = allowed()
    ids = _ids(value)
    if ids is None:
        return None if int(value) <= len(mine) else \
            f"{value} CPUs asked, but this process may use {len(mine)} ({cpulist(mine)})"
    missing = [c for c in ids if c not in mine]
    if missing:
        return f"CPU {cpulist(missing)} is not among the CPUs this process may use ({cpulist(mine)})"
    return None


def near(where: Where) -> tuple[list[int], str]:
    """The allowed CPUs near the variant's GPUs, and how they were found ([] and why not)."""
    if not where.gpus:
        return [], "the variant runs on cpu"
    from listeners.gpu_control import near_cpus

    found: set[int] = set()
    for gpu in where.gpus:
        cpus = near_cpus(gpu)
        if cpus is None:
            return [], f"the host does not say which CPUs are near GPU {gpu}"
        found |= cpus
    close = [c for c in allowed() if c in found]
    if not close:
        return [], f"none of the CPUs NVML puts near GPU {','.join(where.gpus)} is this process's"
    return close, f"near GPU {','.join(where.gpus)} (NVML)"


def choose(count: int, where: Where) -> tuple[list[int], str]:
    """`count` CPUs: near the GPU first, then the others; free ones (no running variant holds them) first."""
    close, how = near(where)
    with _lock:
        rank = sorted(allowed(), key=lambda c: (_held.get(c, 0) > 0, c not in close, c))
        got = sorted(rank[:count])
        for c in got:
            _held[c] = _held.get(c, 0) + 1
    if close and set(got) <= set(close):
        return got, how
    if close:
        return got, f"{how}, and others: too few near CPUs were free"
    return got, f"the first free CPUs: {how}"


def apply(value: str, where: Where, save) -> Applied:
    ids = _ids(value)
    if ids is None:
        ids, how = choose(int(value), where)
    else:
        how = "as listed"
        with _lock:
            for c in ids:
                _held[c] = _held.get(c, 0) + 1
    save({"cpus": ids})
    return Applied(host=cpulist(ids), note=how, record={"cpus": ids}, launch={"cpus": ids})


def release(record: dict) -> None:
    """This process's hold on the CPUs ends (the variant ended)."""
    with _lock:
        for c in record.get("cpus", []):
            if _held.get(c, 0) > 1:
                _held[c] -= 1
            else:
                _held.pop(c, None)


def restore(record: dict) -> str:
    """Nothing of the host changed: the workload's processes held the CPUs, and they are gone."""
    release(record)
    return ""
