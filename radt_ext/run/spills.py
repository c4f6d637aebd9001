"""Where a session's runs spill their full-rate timelines, and what a killed radt-ext's watchdog makes of them.

The session's working directory holds `spill/`, one folder per run: `spill/radt-ext/` for radt-ext's own
run (its first points may come before its id), `spill/<run id>/` for each run the workload started. The
normal end turns each spill file into its run's `timelines/system.parquet` (radt_ext.store.run_points).
When radt-ext was killed outright, its watchdog (told the `spill/` folder when it starts) does the same
for each run it ended, from what the files hold on disk (`log_spilled`): the points after a run's last
whole chunk were in radt-ext's memory and are gone, which the tag `radt_ext.timelines_partial` says.
"""
from __future__ import annotations

import os
import shutil
import tempfile


SPILL = "spill"
OWN = "radt-ext"
TAG_PARTIAL = "radt_ext.timelines_partial"
PARTIAL = "killed: points after the last flushed chunk are missing"


def spill_root(workdir: str) -> str:
    return os.path.join(workdir, SPILL)


def run_dir(root: str, run_id: str | None = None) -> str:
    """A run's spill folder under `root`: radt-ext's own run's with no id."""
    return os.path.join(root, run_id or OWN)


def log_spilled(client, run_id: str, directory: str, call=None) -> int:
    """The points the run's spill files in `directory` hold on disk, as its artifact timelines/system.parquet
    tagged partial; the number of points, 0 (nothing logged) when they hold none. `call(fn)`: how to reach
    the store (waiting out a locked SQLite file)."""
    from radt_ext.store.timelines import ARTIFACT_DIR, SPILL_PREFIX, SPILL_SUFFIX, SYSTEM_FILE, spill_to_parquet

    call = call or (lambda fn: fn())
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(SPILL_PREFIX) and n.endswith(SPILL_SUFFIX))
    except OSError:  # the run spilled nothing
        return 0
    with tempfile.TemporaryDirectory(prefix="radt-timeline-") as tmp:
        path = os.path.join(tmp, SYSTEM_FILE)
        points = spill_to_parquet([os.path.join(directory, n) for n in names], path)
        if points:
            call(lambda: client.log_artifact(run_id, path, ARTIFACT_DIR))
            call(lambda: client.set_tag(run_id, TAG_PARTIAL, PARTIAL))
    return points


def log_all_spilled(client, root: str, own_run_id: str | None, ended: list[str], call=None) -> dict[str, int]:
    """For each run ended after radt-ext was killed: its spilled points as its artifact ({run id: points}
    of those logged); then `root` is removed, as the normal end removes each spill file."""
    logged = {}
    try:
        for run_id in ended:
            points = log_spilled(client, run_id, run_dir(root, None if run_id == own_run_id else run_id), call)
            if points:
                logged[run_id] = points
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return logged
