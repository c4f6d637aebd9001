"""Fixtures the listener tests share."""
import json
import os

import pytest

from listeners import nvml_backend

MATMUL = os.path.join(os.path.dirname(__file__), "..", "..", "listeners", "traces", "h200_matmul.json")


@pytest.fixture
def replay(monkeypatch):
    """NVML replayed from the H200 matmul recording; the recorded trace itself (a module may define its own)."""
    monkeypatch.setenv(nvml_backend.REPLAY_ENV, MATMUL)
    nvml_backend.reset()
    with open(MATMUL) as fh:
        yield json.load(fh)
    nvml_backend.reset()
