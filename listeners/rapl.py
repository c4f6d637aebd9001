"""CPU package and DRAM energy from the Linux powercap interface (Intel RAPL, and AMD through
the same `intel-rapl` zones on kernels that expose it).

Zones: /sys/class/powercap/intel-rapl:<p>/ is package <p> (name `package-<p>`);
its subzones intel-rapl:<p>:<k>/ are `dram`, `core`, `uncore`. `energy_uj` is a
counter that wraps at `max_energy_range_uj`. Energy is reported since open();
power is the energy of the last interval over its length.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from listeners.base import Listener, ListenerError, Target

DOMAINS = {"package": "package", "dram": "dram"}  # powercap zone name prefix -> metric word


@dataclass
class Zone:
    path: Path
    metric: str  # e.g. cpu0_package
    max_range: int
    start: int = 0
    last: int = 0
    last_time: float = 0.0
    total: int = 0  # microjoules since open, wraps unfolded


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def find_zones(root: Path) -> list[tuple[Path, str]]:
    """(zone directory, metric prefix) for every package and DRAM zone under root."""
    out: list[tuple[Path, str]] = []
    if not root.is_dir():
        return out
    for zone in sorted(root.iterdir()):
        m = re.fullmatch(r"(?:intel|amd)-rapl:(\d+)", zone.name)
        if not m:
            continue
        try:
            name = (zone / "name").read_text().strip()
        except OSError:
            continue
        pm = re.fullmatch(r"package-(\d+)", name)
        package = pm.group(1) if pm else m.group(1)
        if name.startswith("package"):
            out.append((zone, f"cpu{package}_package"))
        for sub in sorted(zone.glob(f"{zone.name}:*")):
            try:
                sub_name = (sub / "name").read_text().strip()
            except OSError:
                continue
            if sub_name in DOMAINS and sub_name != "package":
                out.append((sub, f"cpu{package}_{DOMAINS[sub_name]}"))
    return out


class RaplListener(Listener):
    name = "rapl"
    description = "CPU package and DRAM energy and power from /sys/class/powercap (RAPL)"
    default_interval = 1.0
    root: Path = Path("/sys/class/powercap")

    def __init__(self, target: Target, interval: float | None = None, root: str | os.PathLike | None = None):
        super().__init__(target, interval)
        if root is not None:
            self.root = Path(root)

    @classmethod
    def probe(cls, target: Target, root: str | os.PathLike | None = None) -> str | None:
        base = Path(root) if root is not None else cls.root
        zones = find_zones(base)
        if not zones:
            return f"no RAPL zones under {base} (not an Intel/AMD host with powercap, or inside a VM)"
        for zone, _ in zones:
            try:
                _read_int(zone / "energy_uj")
            except PermissionError:
                return (f"cannot read {zone / 'energy_uj'}: permission denied "
                        "(root only since CVE-2020-8694; run as root or chmod o+r energy_uj)")
            except (OSError, ValueError) as exc:
                return f"cannot read {zone / 'energy_uj'}: {exc}"
        return None

    def open(self) -> None:
        reason = self.probe(self.target, self.root)
        if reason:
            raise ListenerError(reason)
        self.zones: list[Zone] = []
        now = time.time()
        for path, metric in find_zones(self.root):
            energy = _read_int(path / "energy_uj")
            try:
                max_range = _read_int(path / "max_energy_range_uj")
            except (OSError, ValueError):
                max_range = 0
            self.zones.append(Zone(path, metric, max_range, energy, energy, now))

    def read(self) -> dict[str, float]:
        values: dict[str, float] = {}
        for zone in self.zones:
            try:
                energy = _read_int(zone.path / "energy_uj")
            except (OSError, ValueError):
                continue
            now = time.time()
            delta = energy - zone.last
            if delta < 0:  # the counter wrapped (at most once per interval at sane intervals)
                delta += zone.max_range if zone.max_range > 0 else 0
                if delta < 0:
                    delta = 0
            zone.total += delta
            values[f"{zone.metric}_energy_j"] = zone.total / 1e6
            if now > zone.last_time:
                values[f"{zone.metric}_power_w"] = delta / 1e6 / (now - zone.last_time)
            zone.last, zone.last_time = energy, now
        return values
