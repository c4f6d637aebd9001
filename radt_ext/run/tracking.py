"""`with radt_ext.track():` — listeners for a user's own script, in a separate process."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile

import mlflow

from listeners.base import Target
from radt_ext.sampling import machine
from radt_ext.errors import UsageError
from radt_ext.workload_api.progress import ENV as PROGRESS_ENV
from radt_ext.workload_api.progress import flush as flush_progress
from radt_ext.sampling.recorder import select_listeners
from radt_ext.run.session import ENV_ACTIVE
from radt_ext.store.client import connect, tracking_uri

READY_TIMEOUT_S = 120


@contextlib.contextmanager
def track(listeners: str | None = None, interval: float | None = None, run_name: str | None = None,
          experiment_name: str | None = None, tags: dict[str, str] | None = None, full_rate_store: bool = False):
    """Sample the hardware while the block runs; yields the active MLflow run.

    Uses the active run, or the one in MLFLOW_RUN_ID, or starts a new one (and ends
    it FINISHED, or FAILED when the block raises). Under `radt-ext run` the outer
    one already monitors this process and gives the run the points of its span, so
    no second monitor is started. full_rate_store: every point into the store (else its
    bounded shape, every point in the run's timeline artifact), as `radt-ext run --full-rate-store`.
    """
    if not isinstance(full_rate_store, bool):
        raise UsageError(f"full_rate_store={full_rate_store!r} is not True or False")
    uri = tracking_uri()
    outer = os.environ.get(ENV_ACTIVE)
    if outer and os.environ.get("MLFLOW_RUN_ID") in (None, "", outer):
        # under `radt-ext run`, which already monitors this process and routes its points to this run
        if experiment_name and mlflow.active_run() is None:
            mlflow.set_experiment(experiment_name)
        own = mlflow.active_run() is None
        run = mlflow.active_run() or mlflow.start_run(run_name=run_name)
        if tags:
            mlflow.set_tags(tags)
        with _ending(own):
            yield run
        return

    select_listeners(listeners, interval, Target(pid=os.getpid()))  # bad input fails here, before any run
    connect(uri)
    if experiment_name:
        mlflow.set_experiment(experiment_name)
    own = mlflow.active_run() is None
    run = mlflow.active_run() or mlflow.start_run(run_name=run_name)
    mlflow.set_tags({**machine.describe(), **(tags or {})})
    progress = os.path.join(tempfile.mkdtemp(prefix="radt-ext-"), "progress.jsonl")
    previous_progress = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = progress
    cmd = [sys.executable, "-m", "radt_ext.run.monitor_process", "--run-id", run.info.run_id,
           "--tracking-uri", uri, "--pid", str(os.getpid()), "--progress-file", progress]
    if listeners:
        cmd += ["--listeners", listeners]
    if interval is not None:
        cmd += ["--interval", str(interval)]
    if full_rate_store:
        cmd.append("--full-rate-store")
    monitor = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = monitor.stdout.readline()
    if not ready.strip().startswith("{"):
        monitor.kill()
        if own:
            mlflow.end_run("FAILED")
        raise UsageError("the radt-ext monitor process did not start; run `radt-ext listeners` to check this machine")
    with _ending(own, before=lambda: _stop_monitor(monitor, previous_progress)):
        yield run


def _stop_monitor(monitor: subprocess.Popen, previous_progress: str | None) -> None:
    """The block is over: the monitor told to stop, flush and summarise, the progress file's variable put back."""
    flush_progress()
    monitor.stdin.close()
    try:
        monitor.wait(timeout=READY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        monitor.kill()
    if previous_progress is None:
        os.environ.pop(PROGRESS_ENV, None)
    else:
        os.environ[PROGRESS_ENV] = previous_progress


@contextlib.contextmanager
def _ending(own: bool, before=None):
    """Around the user's block: after it, `before()` (whatever happened), then the run ended as the block did,
    FINISHED, FAILED or KILLED (interrupted), where `track()` started it (own)."""
    status = "FINISHED"
    try:
        yield
    except BaseException:
        status = "KILLED" if isinstance(sys.exc_info()[1], KeyboardInterrupt) else "FAILED"
        raise
    finally:
        if before is not None:
            before()
        if own:
            mlflow.end_run(status)
