"""Names radt-ext puts into the workload's environment and onto the runs it follows.

Kept apart (no MLflow import) so that the watchdog process and the workload start light.

`radt-ext run` starts the workload before its own run exists (the store is reached while the workload
starts up). The workload's processes carry a marker, RADT_EXT_ACTIVE: the run id when the run was
handed over (`mlflow run`, `--run-id`; the workload gets MLFLOW_RUN_ID too), else a key of this
session. The run id is written to the file named in RADT_EXT_RUN_ID_FILE as soon as the run exists;
`monitor_run_id()` reads it, waiting for it if need be.
"""
from __future__ import annotations

import os
import time

ENV_MONITOR_RUN = "RADT_EXT_ACTIVE"  # marks the workload's processes: radt-ext's run id, or its session key
ENV_RUN_ID_FILE = "RADT_EXT_RUN_ID_FILE"  # holds radt-ext's run id once the run exists
ENV_STARTS_FILE = "RADT_EXT_STARTS_FILE"  # where the workload announces the runs it starts
TAG_MONITOR_RUN = "radt_ext.monitor_run_id"  # on a run the workload started: radt-ext's run of that command
TAG_START_ID = "radt_ext.start_id"  # on a run the workload started: the id its start was announced with
RUN_ID_WAIT_S = 120.0


def write_run_id(path: str, run_id: str) -> None:
    """Atomically: a reader sees the whole id or no file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(run_id)
    os.replace(tmp, path)


def monitor_run_id(timeout: float = RUN_ID_WAIT_S) -> str | None:
    """Inside a workload under `radt-ext run`: the id of the run radt-ext records the command into,
    waiting (at most `timeout` s) while radt-ext is still creating it; None outside radt-ext or when
    it never came."""
    path = os.environ.get(ENV_RUN_ID_FILE)
    if not path:
        return os.environ.get(ENV_MONITOR_RUN) or None  # started by an older radt-ext: the marker is the id
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            with open(path) as fh:
                run_id = fh.read().strip()
            if run_id:
                return run_id
        except OSError:
            pass
        if time.monotonic() > deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.1)
