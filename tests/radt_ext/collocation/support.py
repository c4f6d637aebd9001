"""Test helpers: the CPU workload, and the stand-in MPS/nvidia-smi executables on PATH."""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.traces import TWO_GPUS, gpu_uuids

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "cpu_workload.py")
BIN = os.path.join(os.path.dirname(HERE), "bin")
MIG_TRACE = os.path.join(HERE, "..", "..", "..", "listeners", "traces", "h200_mig_derived.json")


def _trace_uuids() -> tuple[str, list[str]]:
    """The GPU and MIG UUIDs the derived MIG trace answers (it is re-derived when traces are re-recorded)."""
    with open(MIG_TRACE) as fh:
        answers = json.load(fh)["calls"]["nvmlDeviceGetUUID"]
    gpu = answers['[{"ref":"dev0"}]'][0]
    migs = [answers[k][0] for k in sorted(answers) if '"devmig' in k]
    return gpu, migs


GPU_UUID, MIG_UUIDS = _trace_uuids()

TWO_GPU_UUIDS = gpu_uuids(TWO_GPUS)
# A GPU name of this test session's own: the stand-in daemons of test sessions running at the same
# time on this machine then never serve "the same GPU" (the refusal check is machine-wide, as MPS is).
MPS_GPU = str(10 + os.getpid() % 10000)


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
