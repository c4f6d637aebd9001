"""The notebooks in notebooks/ run top to bottom against a store of real runs, so they cannot rot."""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.radt_ext.report.store import store  # noqa: F401

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
REPO = NOTEBOOKS.parent


def execute(name: str, store, monkeypatch) -> nbformat.NotebookNode:  # noqa: F811
    for var in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "RADT_EXT_ACTIVE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.uri)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb


def _text(nb) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", ""))
            out.extend(str(v) for v in o.get("data", {}).values())
    return "\n".join(out)


def test_variants_notebook(store, monkeypatch):  # noqa: F811
    nb = execute("variants.ipynb", store, monkeypatch)
    text = _text(nb)
    assert "2 runs; baseline baseline [exclusive] (tag baseline_run_id)" in text
    assert "Pareto front" in text  # the time/energy figure was drawn
    assert "e2e_duration_s" in text and "e2e_energy_per_sample_j" in text
    assert "startup_share_pct" in text and "throughput_samples_per_s" in text


def test_collocation_notebook(store, monkeypatch):  # noqa: F811
    nb = execute("collocation.ipynb", store, monkeypatch)
    text = _text(nb)
    assert "naive 2 workloads" in text
    assert "small" in text and "large" in text
    assert "makespan_s" in text and "active_s" in text and "startup_share_pct" in text


@pytest.mark.parametrize("name", ["variants.ipynb", "collocation.ipynb"])
def test_notebooks_are_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
