"""Small helpers for tests that read runs back from a real store."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from mlflow.tracking import MlflowClient


def radt(*args: str, env: dict | None = None, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run the real `radt-ext` CLI in a child process."""
    return subprocess.run([sys.executable, "-m", "radt_ext.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, **kw)


def full_rate(uri: str, run_id: str, key: str) -> list:
    """A run's timeline at its full rate, as MLflow Metrics: from its timeline artifact where it has one
    (the store holds the timeline's bounded shape), else the store's history."""
    from radt_ext.store import timelines

    return timelines.history(MlflowClient(uri), run_id, [key])[key]


def only_run(uri: str):
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1, [r.info.run_id for r in runs]
    return runs[0]


def stored_system_points(uri: str, run) -> int:
    """The run's system/* rows in the store."""
    client = MlflowClient(uri)
    return sum(len(client.get_metric_history(run.info.run_id, key))
               for key in run.data.metrics if key.startswith("system/"))


def parent_runs(uri: str) -> list:
    """A sweep's group runs (each group's parent, not the sweep's report run), in any experiment of the store."""
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags and r.data.tags.get("sweep.role") != "report"]


def signalled_sweep(path, marks: list, sig: int, timeout: float = 120) -> tuple[int, str]:
    """`radt-ext sweep path` in a child process, sent `sig` once every file of `marks` exists (the workloads
    that write them are all running); its exit code and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "sweep", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + timeout
        while not all(m.exists() for m in marks):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def sweep_spec(path, name: str, body: str, devices: str = '["0", "1"]', **fields: str):
    """A sweep spec written to `path`: its name and devices, the groups' parents listening with nvml and their
    children with top every 0.2 s, other top-level `fields` (key: YAML text), then `body` (dedented)."""
    head = [f"name: {name}", f"devices: {devices}", *(f"{k}: {v}" for k, v in fields.items()),
            "listeners: nvml", "child_listeners: top", "interval: 0.2"]
    path.write_text("\n".join(head) + "\n" + textwrap.dedent(body).lstrip("\n"))
    return path
