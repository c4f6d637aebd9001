"""`cpu_quota_pct`: a cgroup v2 CPU quota for a variant's workloads (`cpu.max`), in percent of one CPU
(100: one CPU's time, 250: two and a half), like `proc_cpu_pct`.

Needs a delegated cgroup v2 with the cpu controller: RADT_EXT_CGROUP names it, else radt-ext's own cgroup.
A child cgroup is made per variant (its cpu.max written), the workload's process moves into it before it
becomes the workload (launch.py), and the cgroup is removed after the variant.
"""
from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from radt_ext.hostsettings.base import Applied, Where, number

KEY = "cpu_quota_pct"
SCOPE = "process"
ENV = "RADT_EXT_CGROUP"
PERIOD_US = 100_000
REMOVE_PATIENCE_S = 20.0  # the workload's processes may still be ending (a watchdog stops them)
_serial = itertools.count()


def parse(raw) -> str:
    return f"{number(raw, 'percent of one CPU'):g}"


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of each cgroup mount."""
    out = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields, more = left.split(), right.split()
                if more and more[0] in ("cgroup", "cgroup2"):
                    out.append((fields[4], more[0], more[2] if len(more) > 2 else ""))
    except OSError:
        pass
    return out


def base() -> tuple[Path | None, str]:
    """The cgroup v2 directory child cgroups go under, or None and why there is none."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV]), ""
    mounts = _mounts()
    v2 = [m for m, fs, _ in mounts if fs == "cgroup2"]
    if not v2:
        return None, "no cgroup v2 on this host (only cgroup v1 is mounted)"
    own = "/"
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                own = line[3:]
    except OSError:
        pass
    return Path(v2[0]) / own.lstrip("/"), ""


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def check(value: str, where: Where) -> str | None:
    root, why = base()
    if root is None:
        return why
    if "cpu" not in _words(root / "cgroup.controllers"):
        v1 = any(fs == "cgroup" and "cpu" in opts.split(",") for _, fs, opts in _mounts())
        held = "; the cpu controller is on cgroup v1 here" if v1 else ""
        return (f"no cgroup v2 cpu controller at {root}{held}; name a delegated cgroup v2 with the cpu "
                f"controller in {ENV}")
    if not os.access(root, os.W_OK):
        return f"permission: cannot make a cgroup under {root}; name a delegated one in {ENV}"
    if "cpu" not in _words(root / "cgroup.subtree_control"):
        if _words(root / "cgroup.procs") and not os.path.ismount(root):  # cgroup v2: no processes beside children
            return (f"the cpu controller is not enabled for {root}'s children and processes live in it; "
                    f"name a delegated cgroup in {ENV}")
        if not os.access(root / "cgroup.subtree_control", os.W_OK):
            return f"permission: cannot enable the cpu controller in {root / 'cgroup.subtree_control'}"
    return None


def apply(value: str, where: Where, save) -> Applied:
    root, _ = base()
    path = root / f"radt-ext-{os.getpid()}-{next(_serial)}-{where.name}"[:200]
    enabled = "cpu" not in _words(root / "cgroup.subtree_control")
    record = {"cgroup": str(path), "enabled_cpu_in": str(root) if enabled else None}
    save(record)  # before anything changes: a watchdog removes what follows
    if enabled:
        (root / "cgroup.subtree_control").write_text("+cpu")
    path.mkdir()
    quota = int(round(float(value) * PERIOD_US / 100))
    (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
    reported = (path / "cpu.max").read_text().split()
    host = f"{int(reported[0]) * 100 / int(reported[1]):g}" if reported[0].isdigit() else reported[0]
    return Applied(host=host, note=f"cgroup {path}, cpu.max {' '.join(reported)}", record=record,
                   launch={"cgroup": str(path)})


def restore(record: dict) -> str:
    path = Path(record["cgroup"])
    deadline = time.monotonic() + REMOVE_PATIENCE_S
    while path.exists():
        try:
            path.rmdir()  # a cgroup's files go with it; it fails while a process is still in it
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    said = f"cgroup {path.name} removed"
    parent = record.get("enabled_cpu_in")
    if parent and not any(p.is_dir() for p in Path(parent).iterdir()):  # no other cgroup uses it any more
        (Path(parent) / "cgroup.subtree_control").write_text("-cpu")
        said += f", cpu controller of {parent} disabled again"
    return said
