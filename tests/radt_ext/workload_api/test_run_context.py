"""The run context provider, in a real process with a real SQLite store: runs are tagged and announced,
things that are not runs (datasets, logged models) are not."""
from __future__ import annotations

import json

import mlflow
import numpy as np
from mlflow.tracking.context import registry

from radt_ext.workload_api.markers import ENV_MONITOR_RUN, ENV_STARTS_FILE, TAG_MONITOR_RUN, TAG_START_ID
from radt_ext.workload_api.run_context import MonitoredRunContext


def test_the_provider_is_registered_through_its_entry_point():
    names = [type(p).__name__ for p in registry._run_context_provider_registry]
    assert MonitoredRunContext.__name__ in names, "reinstall the package (pip install -e .) to register it"


def test_outside_radt_ext_nothing_is_tagged(tracking_uri, tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_STARTS_FILE, raising=False)
    with mlflow.start_run() as run:
        pass
    assert TAG_MONITOR_RUN not in mlflow.get_run(run.info.run_id).data.tags


def test_runs_are_tagged_and_announced_and_other_things_are_not(tracking_uri, tmp_path, monkeypatch):
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv(ENV_MONITOR_RUN, "monitor-run-id")
    monkeypatch.setenv(ENV_STARTS_FILE, str(starts))
    mlflow.set_experiment("mine")
    with mlflow.start_run() as outer:
        dataset = mlflow.data.from_numpy(np.zeros((4, 2)), name="zeros")  # MLflow resolves context tags here
        mlflow.log_input(dataset)
        mlflow.initialize_logged_model(name="model")  # and here
        with mlflow.start_run(nested=True) as inner:
            pass
    lines = [json.loads(line) for line in starts.read_text().splitlines()]
    assert len(lines) == 2  # two runs; no dataset, no logged model
    for run, line in zip((outer, inner), lines):
        tags = mlflow.get_run(run.info.run_id).data.tags
        assert tags[TAG_MONITOR_RUN] == "monitor-run-id"
        assert tags[TAG_START_ID] == line["start_id"]
        assert line["time"] * 1000 <= run.info.start_time + 1  # announced before the run's start time
    assert TAG_MONITOR_RUN not in (dataset.source.to_dict().get("tags") or {})
