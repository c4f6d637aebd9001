"""What every kind of setting shares: where a variant runs, and what applying a setting gave."""
from __future__ import annotations

from dataclasses import dataclass, field

CPU = "cpu"  # a sweep's device meaning "no GPU"


@dataclass
class Where:
    """Where a variant runs: its devices (GPU indices / GPU-uuids, or cpu) and a name for what it makes."""
    devices: list[str]
    name: str = "variant"

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.devices if d != CPU]


@dataclass
class Applied:
    host: str  # what the host reports back (tag system.<key>.host)
    note: str = ""  # how it was applied (after "applied" in tag system.<key>.status)
    record: dict = field(default_factory=dict)  # what `restore` needs
    launch: dict = field(default_factory=dict)  # for the launcher: cpus, cgroup
    env: dict = field(default_factory=dict)  # for the workload's environment


def number(raw, what: str, whole: bool = False) -> float:
    """A positive number of the spec (ValueError: one line)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (whole and not isinstance(raw, int)):
        raise ValueError(f"expected {'a whole number' if whole else 'a number'} of {what}, got {raw!r}")
    if not raw > 0 or raw != raw or raw == float("inf"):
        raise ValueError(f"expected a number of {what} above 0, got {raw!r}")
    return raw
