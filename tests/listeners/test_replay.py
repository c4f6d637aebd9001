"""The NVML replay backend, the backend accessor and the trace recorder."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pynvml
import pytest

from listeners import nvml_backend, record_trace
from listeners.base import Target
from listeners.nvml import NvmlListener
from listeners.replay import FORMAT, Ref, Replay, TraceMissing
from nvml_fake import TRACES, FakeNvml, record_fake

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SMALL = {
    "format": FORMAT, "meta": {},
    "calls": {
        "nvmlDeviceGetPowerUsage": {'[{"ref":"dev0"}]': [100, 200, 300]},
        "nvmlDeviceGetPcieThroughput": {'[{"ref":"dev0"},0]': [{"nvml_error": pynvml.NVML_ERROR_NOT_SUPPORTED}]},
        "nvmlDeviceGetHandleByIndex": {"[0]": [{"ref": "dev0"}]},
        "nvmlDeviceGetMemoryInfo": {'[{"ref":"dev0"}]': [
            {"struct": "c_nvmlMemory_t", "fields": {"total": 8, "free": 6, "used": 2}}]},
    },
}


def test_replay_answers_each_key_in_recorded_order_then_holds_the_last():
    nv = Replay(SMALL)
    dev = nv.nvmlDeviceGetHandleByIndex(0)
    assert dev == Ref("dev0")
    got = [nv.nvmlDeviceGetPowerUsage(dev) for _ in range(5)]
    assert got == SMALL["calls"]["nvmlDeviceGetPowerUsage"]['[{"ref":"dev0"}]'] + [300, 300]
    assert nv.nvmlDeviceGetMemoryInfo(dev).used == 2
    assert nv.calls_made("nvmlDeviceGetPowerUsage") == 5


def test_replay_raises_the_recorded_nvml_error_class():
    nv = Replay(SMALL)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetPcieThroughput(Ref("dev0"), pynvml.NVML_PCIE_UTIL_TX_BYTES)


def test_replay_refuses_calls_the_trace_never_saw_and_passes_constants():
    nv = Replay(SMALL)
    with pytest.raises(TraceMissing, match="nvmlDeviceGetPowerUsage"):
        nv.nvmlDeviceGetPowerUsage(Ref("dev1"))
    assert nv.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM and nv.NVMLError is pynvml.NVMLError


def test_replay_rejects_a_file_that_is_not_a_trace(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"calls": {}}))
    with pytest.raises(ValueError, match="not an NVML trace"):
        Replay(path)


def test_backend_is_pynvml_unless_the_replay_variable_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv(nvml_backend.REPLAY_ENV, raising=False)
    assert nvml_backend.nvml() is pynvml and not nvml_backend.is_replay()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(SMALL))
    monkeypatch.setenv(nvml_backend.REPLAY_ENV, str(path))
    nvml_backend.reset()
    first = nvml_backend.nvml()
    assert isinstance(first, Replay) and nvml_backend.nvml() is first  # one replay shared per process
    nvml_backend.reset()
    assert nvml_backend.nvml() is not first


def test_recorder_refuses_anything_that_changes_the_gpu():
    fake = FakeNvml()
    rec = record_trace.RecordingNvml(fake)
    for name in ("nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlDeviceResetGpuLockedClocks",
                 "nvmlGpmSetStreamingEnabled", "nvmlDeviceSetPowerManagementLimit"):
        with pytest.raises(PermissionError, match="only reads"):
            getattr(rec, name)
    assert fake.calls == []
    assert rec.nvmlDeviceGetCount() == 1


def _readings(backend, n: int) -> list[dict]:
    with nvml_backend.use(backend):
        listener = NvmlListener(Target(cuda_visible_devices=None))
        listener.open()
        out = [listener.sample()[0].values for _ in range(n)]
        listener.close()
    return out


def test_recorded_trace_replays_exactly_what_the_listener_read_live():
    trace = record_fake(samples=5)
    live = _readings(FakeNvml(), 5)  # a fresh fake gives the same deterministic numbers
    assert _readings(Replay(json.loads(json.dumps(trace))), 5) == live
    assert live[-1]["gpu0_energy_j"] > 0


def test_threaded_recording_self_checks_through_the_replay(tmp_path):
    trace = record_trace.record(0.4, 0.05, 0.1, load=False, real=FakeNvml())
    assert trace["meta"]["sample_counts"]["nvml"] >= 3 and trace["meta"]["listener_errors"] == []
    assert trace["calls"]["nvmlDeviceGetComputeRunningProcesses"]  # per-process calls recorded too
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    lines = record_trace.self_check(str(path))
    assert lines[0] == "probe nvml: None; gpm: None"
    assert any(line.startswith("gpu0_power_w: n=") for line in lines)
    assert any(line.startswith("gpu0_sm_active_pct: n=") for line in lines)


def test_recorder_cli_on_this_machine_records_why_nvml_is_missing(tmp_path):
    # A real child process with the real pynvml: here (no driver) it records nvmlInit's failure.
    out = tmp_path / "t.json"
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "listeners.record_trace", "--out", str(out), "--seconds", "0.2"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(out.read_text())
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        assert trace["meta"]["probe"]["nvml"] is None
    except pynvml.NVMLError:
        assert trace["meta"]["probe"]["nvml"].startswith("NVML not found")
        assert "replay probe nvml: NVML not found" in proc.stdout


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(TRACES, "*.json"))), ids=os.path.basename)
def test_committed_traces_are_small_and_say_where_they_came_from(path):
    assert os.path.getsize(path) < 1024 * 1024
    trace = json.load(open(path))
    assert trace["format"] == FORMAT and trace["calls"]
    meta = trace["meta"]
    assert meta["derived"] == ("derived" in os.path.basename(path))
    assert meta["recorder"].startswith("python -m listeners.record_trace") and not meta.get("fake")
    if meta["derived"]:
        assert meta["derived_by"] and meta["derived_from"]


SLEEP_LOAD = r"""
import sys, time
print("ready", flush=True)
sys.stdin.readline()
print("load-start", time.time(), flush=True)
time.sleep(float(sys.argv[1]))
print("load-end", time.time(), 1, flush=True)
"""


def test_load_child_starts_after_the_idle_quarter(monkeypatch):
    # The handshake and timing of the load phase, with a sleeping child instead of the CUDA matmul.
    monkeypatch.setattr(record_trace, "_start_load", lambda s: record_trace._spawn_load(SLEEP_LOAD, s))
    trace = record_trace.record(1.2, 0.1, 0.2, load=True, real=FakeNvml())
    load = trace["meta"]["load"]
    events = {e["what"]: e["t_rel_s"] for e in load["events"]}
    assert load["returncode"] == 0
    assert 0.29 <= events["load-start"] < 1.0  # after a quarter of 1.2 s idle
    assert events["load-end"] - events["load-start"] >= 0.59  # half the time under load
