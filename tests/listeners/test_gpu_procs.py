"""`gpu_procs`: per-process GPU memory/SM utilization, filtered by the workload's process tree,
against the real H200 recording (the matmul child had pid 459 there)."""
from __future__ import annotations

import json
import os

import pytest

from listeners import nvml_backend, registry
from listeners.base import Target
from listeners.gpu_procs import GpuProcsListener, process_tree

TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "listeners", "traces")
MATMUL = os.path.join(TRACES, "h200_matmul.json")


@pytest.fixture
def replay(monkeypatch):
    monkeypatch.setenv(nvml_backend.REPLAY_ENV, MATMUL)
    nvml_backend.reset()
    with open(MATMUL) as fh:
        yield json.load(fh)
    nvml_backend.reset()


def readings(pid: int, n: int, interval: float = 1e-6) -> list[dict]:
    listener = GpuProcsListener(Target(pid=pid, cuda_visible_devices=None), interval)
    listener.open()
    try:
        return [dict(listener.read()) for _ in range(n)]
    finally:
        listener.close()


def test_registered_and_available_under_replay(replay):
    assert registry.load("gpu_procs") is GpuProcsListener
    assert registry.availability("gpu_procs", Target(pid=1)) is None


def test_the_workloads_own_process_is_attributed(replay, monkeypatch):
    import listeners.gpu_procs as gpu_procs

    monkeypatch.setattr(gpu_procs, "UTIL_EVERY_S", 0.0)  # with a µs interval: every read, as recorded
    load_pid = replay["meta"]["load"]["pid"]
    n = len(replay["calls"]["nvmlDeviceGetComputeRunningProcesses"]['[{"ref":"dev0"}]'])
    values = readings(load_pid, n)
    recorded_mem = [sum(p["fields"]["usedGpuMemory"] for p in answer if p["fields"]["pid"] == load_pid) / 2**20
                    for answer in replay["calls"]["nvmlDeviceGetComputeRunningProcesses"]['[{"ref":"dev0"}]']]
    assert [v["gpu0_proc_mem_mib"] for v in values] == pytest.approx(recorded_mem)
    assert max(v["gpu0_proc_count"] for v in values) == 1
    sm = [v["gpu0_proc_sm_pct"] for v in values if "gpu0_proc_sm_pct" in v]
    recorded_sm = [s["fields"]["smUtil"] for answer in
                   replay["calls"]["nvmlDeviceGetProcessUtilization"]['[{"ref":"dev0"},"*"]']
                   if isinstance(answer, list) for s in answer if s["fields"]["pid"] == load_pid]
    assert sm and max(sm) == max(recorded_sm) and max(sm) > 50  # the matmul kept the SMs busy


def test_process_utilization_is_read_at_most_once_a_second(replay):
    load_pid = replay["meta"]["load"]["pid"]
    values = readings(load_pid, 20, interval=0.2)  # back to back, well inside a second
    assert all("gpu0_proc_mem_mib" in v for v in values)  # the cheap process list: every read
    assert nvml_backend.nvml().calls_made("nvmlDeviceGetProcessUtilization") == 1  # ~2 ms of driver CPU each


def test_other_processes_are_not_counted(replay):
    values = readings(os.getpid(), 60)  # this test process never ran on the recorded GPU
    assert all(v["gpu0_proc_count"] == 0 and v["gpu0_proc_mem_mib"] == 0 for v in values)
    assert not any("gpu0_proc_sm_pct" in v for v in values)


def test_process_tree_holds_descendants():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert {os.getpid(), child.pid} <= process_tree(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert process_tree(None) == set()
