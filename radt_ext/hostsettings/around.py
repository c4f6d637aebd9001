"""A variant's settings applied before it runs and restored after it, whatever happens in between.

    settings = HostSettings({"cpus": "2", "governor": "performance"}, optional=("governor",), where=Where(["0"]))
    watchdog = Watchdog(..., restore=settings.open())   # the restore file exists before anything changes
    try:
        settings.apply()                   # Refused: a setting this host cannot apply and not optional
        ... run the workloads with settings.launch() before their command and settings.env() ...
    finally:
        tags = settings.restore()          # system.<key>.restored
"""
from __future__ import annotations

import json
import os
import sys
import tempfile

from radt_ext.errors import UsageError
from radt_ext.hostsettings import ENV_PREFIX, ORDER, TAG, kind
from radt_ext.hostsettings.base import Applied, Where
from radt_ext.hostsettings.cpus import cpulist
from radt_ext.hostsettings.restore import RestoreFile, folder

LAUNCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")


class Refused(UsageError):
    """A setting this host cannot apply, not marked optional."""


def ordered(system: dict[str, str]) -> list[str]:
    """The order settings are applied in: host-wide first, then GPUs, then the workload's processes."""
    return [k for k in ORDER if k in system] + [k for k in system if k.startswith(ENV_PREFIX)]


def refusal(key: str, value: str, reason: str) -> str:
    return f"system.{key}: {value}: {reason}; mark it optional (optional: [{key}]) to run without it"


def check(system: dict[str, str], optional, where: Where) -> dict[str, str]:
    """{key: why this host cannot apply it} for each of the settings it cannot apply."""
    out = {}
    for key in ordered(system):
        reason = kind(key).check(system[key], where)
        if reason:
            out[key] = reason
    return out


class HostSettings:
    def __init__(self, system: dict[str, str], optional=(), where: Where | None = None):
        self.system = dict(system)
        self.optional = set(optional)
        self.where = where or Where(["cpu"])
        self.file: RestoreFile | None = None
        self.applied: dict[str, Applied] = {}
        self.status: dict[str, str] = {}
        self.restored: dict[str, str] = {}
        self.report = None

    def open(self) -> str:
        """The restore file, made before anything changes (for a watchdog); its path."""
        self.file = RestoreFile()
        return str(self.file.path)

    def apply(self) -> None:
        """Every setting, in order: checked, then applied; a refused optional one is skipped."""
        if self.file is None:
            self.open()
        for key in ordered(self.system):
            value, module = self.system[key], kind(key)
            reason = module.check(value, self.where)
            if reason:
                if key in self.optional:
                    self.status[key] = f"skipped: {reason}"
                    continue
                raise Refused(refusal(key, value, reason))
            save = lambda record, key=key: self.file.save(key, record)  # noqa: E731
            if key.startswith(ENV_PREFIX):
                self.applied[key] = module.apply(value, self.where, save, name=key[len(ENV_PREFIX):])
            else:
                self.applied[key] = module.apply(value, self.where, save)
            self.status[key] = f"applied{': ' + self.applied[key].note if self.applied[key].note else ''}"

    def launch(self) -> list[str]:
        """What goes before a workload's command: the launcher with its CPUs and cgroup ([]: nothing)."""
        opts = {}
        for applied in self.applied.values():
            opts.update(applied.launch)
        if not opts:
            return []
        if self.report is None:
            fd, self.report = tempfile.mkstemp(prefix="launch-", suffix=".jsonl", dir=folder())
            os.close(fd)
            if self.file is not None:
                self.file.keep(self.report)  # removed with the restore file's settings, also after a kill
        argv = [sys.executable, "-I", "-S", LAUNCH, "--report", self.report]
        if "cpus" in opts:
            argv += ["--cpus", ",".join(str(c) for c in opts["cpus"])]
        if "cgroup" in opts:
            argv += ["--cgroup", opts["cgroup"]]
        return [*argv, "--"]

    def env(self) -> dict[str, str]:
        out = {}
        for applied in self.applied.values():
            out.update(applied.env)
        return out

    def started(self) -> list[dict]:
        """What the kernel told each workload process the launcher started: its CPUs and cgroup."""
        if not self.report:
            return []
        try:
            with open(self.report) as fh:
                return [json.loads(line) for line in fh if line.strip()]
        except (OSError, ValueError):
            return []

    def tags(self) -> dict[str, str]:
        """system.<key> (asked), .host (what the host reports back) and .status of every setting."""
        out = {}
        seen = self.started()
        for key in ordered(self.system):
            out[f"{TAG}{key}"] = self.system[key]
            applied = self.applied.get(key)
            if applied is not None and not key.startswith(ENV_PREFIX):
                host = applied.host
                if key == "cpus" and seen:  # the CPUs the kernel gave the workload's processes
                    host = cpulist({c for s in seen for c in s["cpus"]})
                out[f"{TAG}{key}.host"] = host
            if key in self.status:
                out[f"{TAG}{key}.status"] = self.status[key]
        return out

    def restore(self) -> dict[str, str]:
        """Put back what was changed (the last first); system.<key>.restored of each setting applied."""
        from radt_ext.hostsettings.restore import restore_all

        if self.file is not None:
            self.restored = restore_all(self.file.data["settings"])
            self.file.remove()
            self.file = None
        return {f"{TAG}{key}.restored": said for key, said in self.restored.items()}
