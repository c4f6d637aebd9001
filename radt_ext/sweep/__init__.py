"""Sweeps: a YAML spec (or radT CSV) → a validated plan of collocation groups → execution that
resumes where it stopped.

    from radt_ext import sweep
    variants = sweep.plan("examples/sweeps/cpu_smoke.yaml")     # validated, expanded; nothing runs
    outcomes = sweep.run(variants)                               # skips variants FINISHED before;
                                                                 # each on the next free device
    variants = sweep.plan_from_dict({...}, source="my-script")

May import `radt_ext.collocation` and everything below it; never `radt_ext.packing`: schedulers that take
the whole spec (packing) plug in through `schedulers.py`'s entry-point group.
"""
from __future__ import annotations

import importlib
from pathlib import Path

from radt_ext.sweep.plan import Variant, expand
from radt_ext.sweep.spec import SpecError, Sweep, load, parse


def __getattr__(name):  # the executor (MLflow) is imported when used: a plan, and a first job, need no MLflow
    if name in ("Outcome", "execute"):
        return getattr(importlib.import_module("radt_ext.sweep.executor"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plan(path: str | Path, local: bool = True) -> list[Variant]:
    """Variants of a YAML spec or a radT CSV file (by suffix). local=False: the variants run elsewhere (a Slurm
    job each), so a spec without `devices:` keeps each job's first GPU instead of taking this machine's."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        from radt_ext.sweep.radt_csv import load_csv

        return load_csv(path)
    return expand(load(path, local=local))


def plan_from_dict(data: dict, source: str = "<dict>", name: str = "sweep") -> list[Variant]:
    return expand(parse(data, source=source, default_name=name))


def run(variants: list[Variant], dry_run: bool = False, tracking_uri: str | None = None, console=None,
        executor="local", output: str = "table", head=None) -> list:
    """executor: "local" (a pool of devices, or a lane per device), "sequential", "slurm", or an
    executor object such as `radt_ext.sweep.slurm.SlurmExecutor(options)`; output: how a dry run shows
    its plan (table, csv, json)."""
    from radt_ext.store.client import quiet_heap

    with quiet_heap("import"):  # MLflow's, through the executor's modules
        from radt_ext.sweep.executor import execute
    return execute(variants, dry_run=dry_run, uri=tracking_uri, console=console, executor=executor, output=output,
                   head=head)


__all__ = ["plan", "plan_from_dict", "run", "load", "parse", "expand", "execute", "Variant", "Outcome",
           "Sweep", "SpecError"]
