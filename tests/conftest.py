"""Shared test set-up: the `gpu` marker, a fresh SQLite MLflow store per test."""
from __future__ import annotations

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gpu_reason() -> str | None:
    """None when an NVIDIA GPU answers through NVML, else why not."""
    if os.environ.get("RADT_EXT_NVML_REPLAY"):
        return "RADT_EXT_NVML_REPLAY is set: the real GPU path is not under test"
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            if pynvml.nvmlDeviceGetCount() == 0:
                return "NVML found no GPU"
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:
        return f"no NVIDIA GPU here ({type(exc).__name__}: {exc})".splitlines()[0]
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            if reason is None:
                reason = _gpu_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def tracking_uri(tmp_path, monkeypatch):
    """A real SQLite MLflow store of the test's own; MLFLOW_* variables cleared."""
    for var in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "RADT_EXT_ACTIVE",
                "RADT_EXT_PROGRESS_FILE", "RADT_EXT_RUN_ID_FILE"):
        monkeypatch.setenv(var, "")  # recorded, so a value MLflow sets later (set_experiment) is undone too
        monkeypatch.delenv(var)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("RADT_EXT_SPOOL_DIR", str(tmp_path / "spool"))
    import mlflow

    mlflow.set_tracking_uri(uri)
    yield uri
    while mlflow.active_run():
        mlflow.end_run()


@pytest.fixture
def two_gpus(monkeypatch, tracking_uri):
    """tracking_uri, with NVML replayed from the trace recorded on two H100s (tests/traces.py)."""
    from listeners import nvml_backend
    from tests.traces import TWO_GPUS

    monkeypatch.setenv(nvml_backend.REPLAY_ENV, TWO_GPUS)
    nvml_backend.reset()
    yield tracking_uri
    nvml_backend.reset()


@pytest.fixture
def python_exe():
    return sys.executable
