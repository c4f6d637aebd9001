"""notebooks/ops.ipynb runs top to bottom on the committed H100/H200 dataset and its validation."""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[3]
NOTEBOOK = REPO / "notebooks" / "ops.ipynb"


def test_ops_notebook_runs_on_the_dataset(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    text = "\n".join(str(o.get("text", "")) + "".join(str(v) for v in o.get("data", {}).values())
                     for c in nb.cells for o in c.get("outputs", []))
    assert "GPUs: H100, H200" in text
    assert "summed operation time / network time" in text  # the box plot was drawn
    assert "time: median error" in text and "best GPU by edp" in text
    assert "per-operation energy: H200 against H100" in text


def test_ops_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
