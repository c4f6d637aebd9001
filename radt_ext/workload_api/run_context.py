"""MLflow run context provider: marks the runs a monitored workload starts itself.

MLflow calls every registered provider (entry point group `mlflow.run_context_provider`) just
before it creates a run: inside `mlflow.start_run()`, in autologging's own child runs, and in
loggers that resolve MLflow's context tags (PyTorch Lightning's `MLFlowLogger`). Under
`radt-ext run` the workload's environment names the run radt-ext records into and a file to
announce starts in; the provider then tags the new run with both ids and appends one line
`{"start_id", "time"}` to that file, so radt-ext learns at once that a run is starting and finds it
in the store by its tag (workload_runs.py). Outside radt-ext it does nothing. A run started while
radt-ext is still creating its own waits for that id (markers.monitor_run_id).

MLflow also resolves context tags for things that are not runs (datasets, traces, logged
models); those calls are told apart by their caller and get no tags.
"""
from __future__ import annotations

import json
import os
import sys
import time
import uuid

from mlflow.tracking.context.abstract_context import RunContextProvider

from radt_ext.workload_api.markers import ENV_MONITOR_RUN, ENV_STARTS_FILE, TAG_MONITOR_RUN, TAG_START_ID, monitor_run_id

_NOT_RUNS = ("mlflow.data", "mlflow.tracing", "mlflow.genai", "mlflow.tracking._tracking_service")


def _creates_run() -> bool:
    """Whether the code that asked MLflow for context tags is creating a run."""
    frame = sys._getframe(2)  # 0: here, 1: tags(), 2: MLflow's resolve_tags
    while frame is not None and frame.f_globals.get("__name__") == "mlflow.tracking.context.registry":
        frame = frame.f_back
    if frame is None:
        return False
    module = frame.f_globals.get("__name__", "")
    if module.startswith(_NOT_RUNS):
        return False
    if module == "mlflow.tracking.fluent":
        return frame.f_code.co_name == "start_run"  # not create_logged_model and the like
    return True


class MonitoredRunContext(RunContextProvider):
    def in_context(self) -> bool:
        return bool(os.environ.get(ENV_MONITOR_RUN) and os.environ.get(ENV_STARTS_FILE))

    def tags(self) -> dict[str, str]:
        if not _creates_run():
            return {}
        start_id = uuid.uuid4().hex
        line = json.dumps({"start_id": start_id, "time": time.time(), "pid": os.getpid()}) + "\n"
        try:  # one O_APPEND write: lines from several processes never interleave
            fd = os.open(os.environ[ENV_STARTS_FILE], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass  # that run then gets no system metrics; the workload's start_run must never fail
        monitor = monitor_run_id()
        if not monitor:
            return {}  # radt-ext's run never came; the workload's run goes on untagged
        return {TAG_MONITOR_RUN: monitor, TAG_START_ID: start_id}
