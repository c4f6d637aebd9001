"""The energy counter the ops profiler meters with, on replays of a real H200 recording."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from listeners import nvml_backend
from listeners.base import ListenerError
from listeners.energy_counter import EnergyCounter, unavailable_reason

TRACES = Path(__file__).resolve().parents[2] / "listeners" / "traces"


def energy_trace(tmp_path: Path, error: int | None = None, recording: str = "h200_matmul.json") -> Path:
    """A recording (the H200's by default), its energy field (recorded through nvmlDeviceGetFieldValues) also
    answering nvmlDeviceGetTotalEnergyConsumption; or that call failing with NVML error `error`."""
    trace = json.loads((TRACES / recording).read_text())
    samples = next(s for s in trace["calls"]["nvmlDeviceGetFieldValues"].values()
                   if any(f["fields"]["fieldId"] == 83 for f in s[0]))
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


def test_span_counts_whole_update_periods():
    from radt_ext.ops.measure import whole_periods_s

    known = [0.1002, 0.0998, 0.1003, 0.0999, 0.1000, 0.1047]  # a 100 ms counter seen up to 5 ms late
    seen = [0.020, 0.1247, 0.2201, 0.4203]  # the third update missed
    assert whole_periods_s(seen, known, read_s=0.0048) == pytest.approx(4 * 0.1001)  # the median period, four times
    assert whole_periods_s(seen, known[:3], read_s=0.0048) == pytest.approx(0.4003)  # too few periods known
    # a counter that updates about as often as it is read: the seen times are all there is
    assert whole_periods_s(seen, [0.001] * 10, read_s=0.0005) == pytest.approx(0.4003)


def test_metered_window_raises_what_the_reading_thread_hit(tmp_path, replay):
    import torch

    from radt_ext.ops.measure import Clock, measure

    replay(energy_trace(tmp_path))

    class Failing(EnergyCounter):  # the real counter, until the driver stops answering
        reads = 0

        def read_j(self):
            self.reads += 1
            if self.reads > 3:
                raise ListenerError("the driver stopped answering")
            return super().read_j()

    x = torch.randn(16, 16)
    with Failing() as counter:
        with pytest.raises(ListenerError, match="stopped answering"):
            measure(lambda: x @ x, Clock(torch.device("cpu")), counter, min_window_s=0.02)


def test_power_timeline_beside_the_counter(tmp_path, replay):
    import math
    import time

    replay(energy_trace(tmp_path, recording="h100_power_samples.json"))  # the H100's driver sample buffer
    with EnergyCounter() as counter:
        watts = counter.timeline_w(0.0, time.time() + 3600)
    assert 50 < watts < 700  # the recorded samples after open: the board's power, in W (NVML gives mW)
    replay(energy_trace(tmp_path))  # the H200 recording kept no sample buffer
    with EnergyCounter() as counter:
        assert math.isnan(counter.timeline_w(0.0, time.time() + 3600))


def test_state_and_network_rounds_record_what_may_move_a_measurement(tmp_path, replay):
    import torch

    from radt_ext.ops.measure import Clock
    from radt_ext.ops.network import NetworkRounds

    replay(energy_trace(tmp_path))
    model = torch.nn.Linear(32, 32)
    with EnergyCounter() as counter:
        state = counter.state()
        rounds = NetworkRounds(model, (torch.randn(64, 32),), "inference", Clock(torch.device("cpu")), counter, 0.02)
        rounds.round()  # one: the recording's energy samples run out within a few windows
    # the H200's recording under a matmul: boost clocks, P0, a throttle reason decoded by name
    assert state["sm_clock_mhz"] > 1000 and state["mem_clock_mhz"] > 1000 and state["pstate"] == 0
    assert 20 < state["temp_c"] < 100 and isinstance(state["throttle"], str) and state["throttle"]
    [d] = rounds.details
    assert d["phase"] == "inference" and d["round"] == 0 and d["time_ms"] > 0 and d["power_w"] > 0
    assert d["before_sm_clock_mhz"] > 1000 and d["during_sm_clock_mhz"] > 1000 and "during_throttle" in d
