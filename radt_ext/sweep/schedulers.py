"""Schedulers that take a whole sweep spec and decide themselves which variants share which GPU (the
packing scheduler of `radt_ext.packing`) plug in here through the entry-point group
`radt_ext.sweep_schedulers`, so the sweep names them only by the word a spec or `--executor` uses.

A scheduler is an object with
    parse(data, modes, source) -> options or None   # its keys of the spec's top level; None: not asked for
    jobs(spec) -> list                              # the jobs it will run (one line on bad input)
    run(spec, dry, console, output) -> list[Outcome]  # dry: the plan only (output: table, csv, json)
"""
from __future__ import annotations

from functools import cache

from radt_ext.errors import UsageError

GROUP = "radt_ext.sweep_schedulers"


@cache
def _entry_points() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=GROUP)}


def names() -> list[str]:
    return sorted(_entry_points())


def scheduler(name: str):
    ep = _entry_points().get(name)
    if ep is None:
        raise UsageError(f"sweep scheduler {name!r} is not installed; reinstall radt-ext (pip install -e .) "
                         f"to register its schedulers{' (' + ', '.join(names()) + ')' if names() else ''}")
    return ep.load()
