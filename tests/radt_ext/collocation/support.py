"""Test helpers: the CPU workload, and the stand-in MPS/nvidia-smi executables on PATH."""
from __future__ import annotations

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "cpu_workload.py")
BIN = os.path.join(os.path.dirname(HERE), "bin")
MIG_TRACE = os.path.join(HERE, "..", "..", "..", "listeners", "traces", "h200_mig_derived.json")
GPU_UUID = "GPU-de744ae5-9727-f28b-5141-a317e20ff9e8"  # the GPU of the recorded traces
MIG_UUIDS = ["MIG-de744ae5-9727-f28b-5141-a317e20f0001", "MIG-de744ae5-9727-f28b-5141-a317e20f0002"]


def cpu_command(seconds: float = 0.8, batch_size: int = 32, stamp: str = "", exit: int = 0) -> list[str]:
    cmd = [sys.executable, WORKLOAD, "--seconds", str(seconds), "--batch-size", str(batch_size), "--exit", str(exit)]
    return cmd + (["--stamp", stamp] if stamp else [])


def stamps(path) -> list[list[str]]:
    with open(path) as fh:
        return [line.split() for line in fh if line.strip()]


class StandIns:
    def __init__(self, tmp_path):
        self.log = tmp_path / "standin.jsonl"
        self.state = tmp_path / "smi_state.json"

    def calls(self, tool: str | None = None) -> list[dict]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def set_gpus(self, gpus: list[dict]) -> None:
        self.state.write_text(json.dumps({"gpus": gpus}))

    def smi_state(self) -> dict:
        return json.loads(self.state.read_text())


@pytest.fixture
def standins(tmp_path, monkeypatch):
    s = StandIns(tmp_path)
    monkeypatch.setenv("PATH", BIN + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("RADT_EXT_STANDIN_LOG", str(s.log))
    monkeypatch.setenv("RADT_EXT_FAKE_SMI_STATE", str(s.state))
    s.set_gpus([{"index": "0", "name": "NVIDIA H200", "uuid": GPU_UUID, "mig": "Disabled", "instances": []}])
    return s
