"""registry.check_target against a recorded trace in which NVML starts but cannot list a GPU."""
from __future__ import annotations

import json

import pynvml

from listeners import nvml_backend, registry
from listeners.base import Target
from nvml_fake import record_fake, replay_from


def test_a_gpu_nvml_cannot_open_is_a_reason_not_a_crash(tmp_path, monkeypatch):
    trace = record_fake()
    # as in a container whose device cgroup hides a GPU that NVML still counts
    trace["calls"]["nvmlDeviceGetHandleByIndex"]["[0]"] = [{"nvml_error": pynvml.NVML_ERROR_NO_PERMISSION}]
    path = tmp_path / "denied.json"
    path.write_text(json.dumps(trace))
    replay_from(monkeypatch, path)
    try:
        target = Target(cuda_visible_devices="0")
        assert registry.check_target(target) is None  # the GPU listeners say why, one line each
        reason = registry.availability("nvml", target)
        assert "Insufficient Permissions" in reason and "\n" not in reason
    finally:
        nvml_backend.reset()


class _CountingNvml:
    """The real module's shape where it matters here: NVML counts its starts and stops."""

    def __init__(self):
        self.starts = self.stops = 0
        self.NVMLError = pynvml.NVMLError

    def nvmlInit(self):
        self.starts += 1

    def nvmlShutdown(self):
        self.stops += 1

    def nvmlDeviceGetCount(self):
        return 1

    def __getattr__(self, name):
        return getattr(pynvml, name)


def test_the_real_nvml_stays_started_once_a_target_was_checked(monkeypatch):
    """check_target keeps one start of the real NVML for the process, so the probes after it (each a start
    and a stop) never bring NVML's count to zero, where its stop costs ~10 ms on a GPU host."""
    from listeners import devices

    monkeypatch.delenv(nvml_backend.REPLAY_ENV, raising=False)
    fake = _CountingNvml()
    monkeypatch.setattr(nvml_backend, "_real", nvml_backend.OneCallAtATime(fake))
    monkeypatch.setattr(nvml_backend, "_held", False)
    monkeypatch.setattr(devices, "resolve", lambda visible: ["0"])
    registry.check_target(Target(cuda_visible_devices="0"))
    assert fake.starts - fake.stops == 1  # held
    registry.check_target(Target(cuda_visible_devices="0"))
    assert fake.starts - fake.stops == 1 and fake.starts == 3  # held once, not again


def test_a_replay_is_never_held(tmp_path, monkeypatch):
    path = tmp_path / "h.json"
    path.write_text(json.dumps(record_fake()))
    replay_from(monkeypatch, path)
    try:
        nvml_backend.hold()
        assert nvml_backend.nvml().calls_made("nvmlInit") == 0
    finally:
        nvml_backend.reset()
