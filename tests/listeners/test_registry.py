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
