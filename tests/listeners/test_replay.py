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
    real = nvml_backend.nvml()
    assert isinstance(real, nvml_backend.OneCallAtATime) and real is nvml_backend.nvml() and not nvml_backend.is_replay()
    assert real.NVMLError is pynvml.NVMLError and real.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM  # pynvml's own
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
    """The values of every reading of n samples and the closing one (their times depend on the clock)."""
    with nvml_backend.use(backend):
        listener = NvmlListener(Target(cuda_visible_devices=None))
        listener.open()
        batches = [listener.sample() for _ in range(n)] + [listener.closing_sample()]
        listener.close()
    return [dict(r.values) for batch in batches for r in batch]


def test_recorded_trace_replays_exactly_what_the_listener_read_live():
    trace = record_fake(samples=5)
    live = _readings(FakeNvml(), 5)  # a fresh fake gives the same deterministic numbers
    assert _readings(Replay(json.loads(json.dumps(trace))), 5) == live
    assert live[-1]["gpu0_power_w"] > 0 and any(v.get("gpu0_energy_j", 0) > 0 for v in live)


def test_the_sample_buffer_is_recorded_compactly_with_its_value_type():
    trace = record_fake(samples=2)
    (key, answers), = trace["calls"]["nvmlDeviceGetSamples"].items()
    assert json.loads(key) == [{"ref": "dev0"}, pynvml.NVML_TOTAL_POWER_SAMPLES, "*"]  # last-seen left out
    assert answers[0]["value_type"] == pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
    assert len(answers[0]["samples"]) == 100 and all(len(s) == 2 for s in answers[0]["samples"])
    assert answers[0]["samples"][0] == [1_700_000_000_000_000, 100_000]  # µs, mW as the driver gave them


BUFFER = {"format": FORMAT, "meta": {}, "calls": {"nvmlDeviceGetSamples": {'[{"ref":"dev0"},0,"*"]': [
    {"value_type": 1, "samples": [[1000, 10], [2000, 20], [3000, 30]]},  # open: the backlog
    {"value_type": 1, "samples": [[4000, 40], [5000, 50]]},  # a drain
    {"nvml_error": pynvml.NVML_ERROR_NOT_FOUND},  # a drain with nothing new
    {"value_type": 1, "samples": [[6000, 60]]},
]}}}


def _ask(nv, last_seen):
    try:
        kind, samples = nv.nvmlDeviceGetSamples(Ref("dev0"), pynvml.NVML_TOTAL_POWER_SAMPLES, last_seen)
    except pynvml.NVMLError_NotFound:
        return None
    assert kind == 1
    return [(s.timeStamp, s.sampleValue.uiVal) for s in samples]


def test_sample_buffer_replays_with_the_drivers_last_seen_semantics():
    nv = Replay(BUFFER)
    assert _ask(nv, 0) == [(1000, 10), (2000, 20), (3000, 30)]  # the backlog
    assert _ask(nv, 3000) == [(4000, 40), (5000, 50)]  # what came since
    assert _ask(nv, 5000) is None  # NotFound: nothing new, as recorded
    assert _ask(nv, 3500) == [(4000, 40), (5000, 50), (6000, 60)]  # any last-seen, up to this call's view


def test_past_the_recording_the_buffer_timeline_repeats_without_inventing_values():
    nv = Replay(BUFFER)
    _ask(nv, 0)
    last, got = 3000, []
    for _ in range(6):
        new = _ask(nv, last) or []
        got += new
        last = new[-1][0] if new else last
    times = [t for t, _ in got]
    assert times == sorted(times) and len(set(times)) == len(times) and times[-1] > 6000
    assert {v for _, v in got} <= {10, 20, 30, 40, 50, 60}
    assert (7000, 10) in got  # the second cycle: the first sample, one cycle (6000 µs) later


def test_the_buffer_answer_never_holds_more_than_the_recorded_buffer_did():
    nv = Replay(BUFFER)
    for _ in range(8):
        _ask(nv, 3000)
    assert len(_ask(nv, 0)) == 3


def test_a_trace_without_the_sample_buffer_replays_it_as_not_supported():
    nv = Replay(SMALL)  # recorded before the buffer was read
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nv.nvmlDeviceGetSamples(Ref("dev0"), pynvml.NVML_TOTAL_POWER_SAMPLES, 0)
    trace = {"format": FORMAT, "meta": {}, "calls": {"nvmlDeviceGetSamples": {'[{"ref":"dev0"},0,"*"]': [
        {"nvml_error": pynvml.NVML_ERROR_NO_PERMISSION}]}}}
    with pytest.raises(pynvml.NVMLError_NoPermission):  # a recorded failure is replayed as it was
        Replay(trace).nvmlDeviceGetSamples(Ref("dev0"), pynvml.NVML_TOTAL_POWER_SAMPLES, 0)


def test_field_values_among_a_recorded_calls_fields_are_answered_from_its_entries():
    trace = json.load(open(os.path.join(TRACES, "h200_idle.json")))
    (key, answers), = trace["calls"]["nvmlDeviceGetFieldValues"].items()
    ids = json.loads(key)[1]
    nv = Replay(trace)
    wanted = [ids[3], ids[0]]
    got = [nv.nvmlDeviceGetFieldValues(Ref("dev0"), wanted) for _ in range(2)]
    for k in range(2):
        assert [f.fieldId for f in got[k]] == wanted
        assert [f.value.uiVal for f in got[k]] == [answers[k][3]["fields"]["value"]["fields"]["uiVal"],
                                                  answers[k][0]["fields"]["value"]["fields"]["uiVal"]]
    with pytest.raises(TraceMissing):  # an id no recorded call asked for
        nv.nvmlDeviceGetFieldValues(Ref("dev0"), [ids[0], 99999])


def test_threaded_recording_self_checks_through_the_replay(tmp_path):
    trace = record_trace.record(0.4, 0.05, 0.1, load=False, real=FakeNvml())
    assert trace["meta"]["sample_counts"]["nvml"] >= 3 and trace["meta"]["listener_errors"] == []
    assert trace["calls"]["nvmlDeviceGetComputeRunningProcesses"]  # per-process calls recorded too
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    lines = record_trace.self_check(str(path))
    assert lines[0] == "probe nvml: None; gpm: None"
    assert any(line.startswith("gpu0_power_w: n=") for line in lines)
    assert trace["meta"]["power_points"] >= 50 and trace["meta"]["power_point_spacing_s_median"] == 0.02
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


def _util(pid: int, ts: int, sm: int) -> dict:
    return {"struct": "c_nvmlProcessUtilizationSample_t",
            "fields": {"pid": pid, "timeStamp": ts, "smUtil": sm, "memUtil": 0, "encUtil": 0, "decUtil": 0}}


PROCS = {"format": FORMAT, "meta": {}, "calls": {
    "nvmlDeviceGetComputeRunningProcesses": {'[{"ref":"dev0"}]': [[], [], [], [], []]},
    "nvmlDeviceGetProcessUtilization": {'[{"ref":"dev0"},"*"]': [
        [_util(7, 1000, 10)],
        [_util(7, 2000, 20), _util(8, 2000, 5)],
        {"nvml_error": pynvml.NVML_ERROR_NOT_FOUND},
        [_util(7, 4000, 40)],
        {"nvml_error": pynvml.NVML_ERROR_NO_PERMISSION},
    ]}}}


def _utilization(nv, since):
    try:
        return [(s.pid, s.timeStamp, s.smUtil) for s in nv.nvmlDeviceGetProcessUtilization(Ref("dev0"), since)]
    except pynvml.NVMLError_NotFound:
        return None


def test_process_utilization_answers_where_the_recording_has_come_since_the_asked_time():
    nv = Replay(PROCS)
    assert _utilization(nv, 0) == [(7, 1000, 10)]  # the first recorded call's view
    assert _utilization(nv, 1000) == [(7, 2000, 20), (8, 2000, 5)]
    for _ in range(4):  # the process list, asked every tick, moves the recording on
        nv.nvmlDeviceGetComputeRunningProcesses(Ref("dev0"))
    # asked rarely: each process's newest sample since then, as of the 4th tick (one entry a process)
    assert _utilization(nv, 1000) == [(8, 2000, 5), (7, 4000, 40)]
    assert _utilization(nv, 4000) is None  # nothing newer
    nv.nvmlDeviceGetComputeRunningProcesses(Ref("dev0"))
    with pytest.raises(pynvml.NVMLError_NoPermission):  # a recorded failure at that moment, as it was
        nv.nvmlDeviceGetProcessUtilization(Ref("dev0"), 4000)


def test_the_real_backend_makes_one_nvml_call_at_a_time_across_threads():
    import threading
    import time
    import types

    inside, most = [0], [0]

    def nvmlDeviceGetCount():  # noqa: N802 (pynvml's name)
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.002)
        inside[0] -= 1
        return 2

    module = types.SimpleNamespace(nvmlDeviceGetCount=nvmlDeviceGetCount, NVML_SUCCESS=0, helper=lambda: "as is")
    nv = nvml_backend.OneCallAtATime(module)
    threads = [threading.Thread(target=lambda: [nv.nvmlDeviceGetCount() for _ in range(20)]) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and nv.nvmlDeviceGetCount() == 2
    assert nv.NVML_SUCCESS == 0 and nv.helper() == "as is"
