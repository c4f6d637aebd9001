"""The GPU settings through NVML (power limit, locked clocks, near CPUs) on the replay layer: the setter
calls recorded, the replayed GPU honouring them, and NVML's refusals as one line naming why."""
from __future__ import annotations

import os

import pytest

from listeners import gpu_control, nvml_backend
from listeners.base import ListenerError
from listeners.replay import SETS_ENV
from tests.traces import settings_trace


@pytest.fixture
def replay(tmp_path, monkeypatch):
    def use(**kw):
        monkeypatch.setenv(nvml_backend.REPLAY_ENV, settings_trace(tmp_path, **kw))
        monkeypatch.setenv(SETS_ENV, str(tmp_path / "sets.jsonl"))
        nvml_backend.reset()
        return nvml_backend.nvml()
    yield use
    nvml_backend.reset()


def test_a_power_limit_set_is_recorded_and_read_back(replay):
    nv = replay()
    before = gpu_control.power("0")
    assert (before["current_w"], before["min_w"], before["max_w"]) == (700, 200, 700)
    assert gpu_control.set_power("0", 300) == 300
    assert gpu_control.power("0")["current_w"] == 300  # the replayed GPU answers the limit set
    calls = nv.set_calls()
    assert [(c["fn"], c["args"], c["pid"]) for c in calls] == [("nvmlDeviceSetPowerManagementLimit", [300_000],
                                                                 os.getpid())]


def test_the_check_refuses_a_limit_out_of_range_and_sets_nothing_new(replay):
    nv = replay()
    with pytest.raises(ListenerError, match=r"900 W is outside GPU 0's range 200\.\.700 W"):
        gpu_control.check_power("0", 900)
    gpu_control.check_power("0", 250)  # permitted: found by setting the current limit again
    assert [c["args"] for c in nv.set_calls()] == [[700_000]]
    assert gpu_control.power("0")["current_w"] == 700


def test_not_permitted_is_one_line_naming_permission(replay):
    nv = replay(permitted=False)
    with pytest.raises(ListenerError, match=r"^permission: NVML refused to set the power limit"):
        gpu_control.check_power("0", 300)
    with pytest.raises(ListenerError, match=r"^permission: "):
        gpu_control.lock_clocks("0", 1410, 1410)
    assert nv.set_calls() == []


def test_locked_clocks_bound_the_clock_reads_until_reset(replay):
    nv = replay()
    recorded = nv.nvmlDeviceGetClockInfo(nv.nvmlDeviceGetHandleByIndex(0), nv.NVML_CLOCK_SM)
    uuid, now = gpu_control.lock_clocks("0", 1000, 1200)
    assert uuid.startswith("GPU-") and 1000 <= now <= 1200 and recorded > 1200
    gpu_control.reset_clocks("0")
    assert nv.nvmlDeviceGetClockInfo(nv.nvmlDeviceGetHandleByIndex(0), nv.NVML_CLOCK_SM) == recorded
    assert [c["fn"] for c in nv.set_calls()] == ["nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks"]
    with pytest.raises(ListenerError, match="2400 MHz is above GPU 0's highest graphics clock, 1980 MHz"):
        gpu_control.check_clocks("0", 2400, 2400)


def test_clocks_are_refused_in_mig_mode(replay):
    replay(mig=True)
    with pytest.raises(ListenerError, match="^MIG: GPU 0 is in MIG mode"):
        gpu_control.check_clocks("0", 1410, 1410)


def test_the_cpus_near_a_gpu_come_from_nvml(replay):
    replay(near_cpus=(1,))
    assert gpu_control.near_cpus("0") == {1}
    assert gpu_control.near_cpus("7") is None  # no such GPU: the host does not say
