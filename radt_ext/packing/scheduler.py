"""The packing scheduler as the sweep sees it (registered in setup.cfg under `radt_ext.sweep_schedulers`):
the spec's `schedule: pack` / `max_slowdown` / `pack:` keys, the queue's jobs, and the run."""
from __future__ import annotations

from radt_ext.packing import options, queue
from radt_ext.packing import run as pack_run


def parse(data: dict, modes: list[str], source: str):
    return options.parse(data, modes, source)


def jobs(spec) -> list:
    return queue.job_variants(spec)


def run(spec, dry: bool = False, console=None, output: str = "table") -> list:
    return pack_run.run(spec, dry=dry, console=console, output=output)
