"""`governor`: the CPU frequency governor of every CPU of the host (cpufreq's scaling_governor), e.g.
performance or powersave. The whole host's: variants that set it run one at a time."""
from __future__ import annotations

import os
from pathlib import Path

from radt_ext.hostsettings.base import Applied, Where

KEY = "governor"
SCOPE = "host"
ROOT = Path("/sys/devices/system/cpu")


def parse(raw) -> str:
    if not isinstance(raw, str) or not raw.strip() or not raw.replace("_", "").isalnum():
        raise ValueError(f"expected a governor's name such as performance or powersave, got {raw!r}")
    return raw


def files() -> list[Path]:
    return sorted(ROOT.glob("cpu[0-9]*/cpufreq/scaling_governor"), key=lambda p: int(p.parts[-3][3:]))


def check(value: str, where: Where) -> str | None:
    found = files()
    if not found:
        return f"no cpufreq on this host (no {ROOT}/cpu*/cpufreq/scaling_governor: frequency scaling is off or hidden)"
    for path in found:
        if not os.access(path, os.W_OK):
            return f"permission: {path} is not writable (needs root, and /sys mounted read-write)"
        available = (path.parent / "scaling_available_governors").read_text().split()
        if value not in available:
            return f"{value!r} is not among {path.parts[-3]}'s governors ({', '.join(available)})"
    return None


def _said(values: dict[str, str]) -> str:
    return ", ".join(sorted(set(values.values())))


def apply(value: str, where: Where, save) -> Applied:
    before = {str(p): p.read_text().strip() for p in files()}
    save({"governors": before})
    for path in before:
        Path(path).write_text(value)
    after = {str(p): p.read_text().strip() for p in files()}
    return Applied(host=_said(after), note=f"on {len(after)} CPUs", record={"governors": before})


def restore(record: dict) -> str:
    before = record["governors"]
    for path, value in before.items():
        Path(path).write_text(value)
    return f"governor {_said(before)} on {len(before)} CPUs"
