"""What a Slurm sweep asks Slurm for: a `slurm:` block of the spec, overridden by the command line.

    slurm:
      partition: gpu
      gpus_per_job: 1          # --gpus-per-node for each variant's job; leave out on CPU partitions
      cpus_per_job: 8
      mem: 64G
      time_limit: 90           # minutes, or [D-]HH:MM[:SS]
      account: my-project
      folder: slurm-jobs       # job scripts and logs (relative to the spec); on a filesystem nodes share
      sbatch: {qos: high, constraint: h100}    # any other sbatch option, --KEY=VALUE
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace

from radt_ext.errors import UsageError

KEYS = ("partition", "gpus_per_job", "cpus_per_job", "mem", "time_limit", "account", "folder", "sbatch")
_TIME = re.compile(r"^(?:(\d+)-)?(\d+):(\d{1,2})(?::(\d{1,2}))?$")
_OPTION = re.compile(r"^[a-z][a-z0-9-]*$")


@dataclass
class SlurmOptions:
    partition: str | None = None
    gpus_per_job: int | None = None
    cpus_per_job: int | None = None
    mem: str | None = None
    time_limit: int = 60  # minutes
    account: str | None = None
    folder: str | None = None
    sbatch: dict[str, str] = field(default_factory=dict)

    def merged(self, **overrides) -> "SlurmOptions":
        """These options with every override that is not None (the command line wins over the spec)."""
        known = {f.name for f in fields(self)}
        given = {k: v for k, v in overrides.items() if k in known and v is not None and v != {}}
        if "sbatch" in given:
            given["sbatch"] = {**self.sbatch, **given["sbatch"]}
        return replace(self, **given)


def minutes(value, where: str) -> int:
    """A time limit in whole minutes from minutes or [D-]HH:MM[:SS] (rounded up, as Slurm does)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise UsageError(f"{where}: {value} minutes; give at least 1")
        return value
    text = str(value).strip()
    if text.isdigit():
        return minutes(int(text), where)
    m = _TIME.match(text)
    if not m:
        raise UsageError(f"{where}: {text!r} is no time limit; give minutes (90) or [D-]HH:MM[:SS] (1-12:00:00)")
    days, hours, mins, secs = (int(x) if x else 0 for x in m.groups())
    total = days * 1440 + hours * 60 + mins + (1 if secs else 0)
    return minutes(total, where)


def sbatch_option(text: str, where: str) -> tuple[str, str]:
    """KEY=VALUE (or a flag KEY) of an extra sbatch option, as in `--sbatch qos=high`."""
    key, _, value = text.partition("=")
    key = key.strip().lstrip("-")
    if not _OPTION.match(key):
        raise UsageError(f"{where}: {text!r} is not an sbatch option; write KEY=VALUE, e.g. qos=high")
    return key.replace("-", "_"), value.strip()


def parse(block, source: str) -> SlurmOptions:
    """The spec's `slurm:` block; a one-line UsageError naming the field for anything wrong."""
    where = f"{source}: slurm"
    if not isinstance(block, dict):
        raise UsageError(f"{where}: expected a mapping such as {{partition: gpu, gpus_per_job: 1}}")
    for key in block:
        if key not in KEYS:
            raise UsageError(f"{where}.{key}: unknown field; use one of {', '.join(KEYS)}")
    out = SlurmOptions()
    for key in ("partition", "mem", "account", "folder"):
        if block.get(key) is not None:
            if not isinstance(block[key], (str, int)) or isinstance(block[key], bool) or not str(block[key]).strip():
                raise UsageError(f"{where}.{key}: expected text")
            setattr(out, key, str(block[key]).strip())
    for key in ("gpus_per_job", "cpus_per_job"):
        value = block.get(key)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "gpus_per_job" else 1):
                raise UsageError(f"{where}.{key}: expected a whole number, got {value!r}")
            setattr(out, key, value)
    if block.get("time_limit") is not None:
        out.time_limit = minutes(block["time_limit"], f"{where}.time_limit")
    extra = block.get("sbatch") or {}
    if not isinstance(extra, dict):
        raise UsageError(f"{where}.sbatch: expected a mapping of sbatch options, e.g. {{qos: high}}")
    for key, value in extra.items():
        k, _ = sbatch_option(str(key), f"{where}.sbatch")
        out.sbatch[k] = "" if value is None or value is True else str(value)
    return out
