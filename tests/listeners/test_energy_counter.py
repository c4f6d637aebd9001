"""The energy counter the ops profiler meters with, on replays of a real H200 recording."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from listeners import nvml_backend
from listeners.base import ListenerError
from listeners.energy_counter import EnergyCounter, unavailable_reason

TRACES = Path(__file__).resolve().parents[2] / "listeners" / "traces"


def energy_trace(tmp_path: Path, error: int | None = None) -> Path:
    """The H200 recording, its energy field (recorded through nvmlDeviceGetFieldValues) also answering
    nvmlDeviceGetTotalEnergyConsumption; or that call failing with NVML error `error`."""
    trace = json.loads((TRACES / "h200_matmul.json").read_text())
    samples = next(iter(trace["calls"]["nvmlDeviceGetFieldValues"].values()))
    energy = [next(f["fields"]["value"]["fields"]["ullVal"] for f in s if f["fields"]["fieldId"] == 83)
              for s in samples]
    answers = [{"nvml_error": error}] * 3 if error is not None else energy
    trace["calls"]["nvmlDeviceGetTotalEnergyConsumption"] = {'[{"ref":"dev0"}]': answers}
    path = tmp_path / ("no_energy.json" if error is not None else "energy.json")
    path.write_text(json.dumps(trace))
    return path


@pytest.fixture
def replay(monkeypatch):
    def use(path):
        monkeypatch.setenv(nvml_backend.REPLAY_ENV, str(path))
        nvml_backend.reset()
    yield use
    nvml_backend.reset()


def test_counter_reads_joules_and_gpu_facts(tmp_path, replay):
    replay(energy_trace(tmp_path))
    with EnergyCounter() as counter:
        first, second = counter.read_j(), counter.read_j()
        facts = counter.facts()
    assert second > first > 1000  # joules since the driver loaded, rising under the recorded load
    assert facts["gpu_name"] == "NVIDIA H200" and facts["power_limit_w"] == 700.0
    assert facts["driver"] == "580.159.04"


def test_gpu_without_energy_counter_is_one_line(tmp_path, replay):
    replay(energy_trace(tmp_path, error=3))  # NVML_ERROR_NOT_SUPPORTED
    reason = unavailable_reason()
    assert reason.startswith("GPU NVIDIA H200 has no energy counter") and "--no-energy" in reason
    assert "\n" not in reason


def test_machine_without_driver_is_one_line(replay):
    replay(TRACES / "no_driver.json")
    with pytest.raises(ListenerError, match="NVML not found"):
        EnergyCounter()


def test_metered_window_spans_counter_updates(tmp_path, replay):
    import torch

    from radt_ext.ops.measure import TICK_SLACK, Clock, measure

    replay(energy_trace(tmp_path))
    x = torch.randn(32, 32)
    with EnergyCounter() as counter:
        w = measure(lambda: x @ x, Clock(torch.device("cpu")), counter, min_window_s=0.02)
    assert w.window_s >= TICK_SLACK * 0.02 and w.power_w > 0  # one update period may read a little short
    assert w.energy_mj == pytest.approx(w.power_w * w.time_ms)
