"""Every run the script opens gets the GPU's counter energy over its own span, however short: the real
CLI, a real SQLite store, the `nvml` listener on the H100 trace with the driver's power sample buffer."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from listeners import nvml_backend
from radt_ext.figures.energy import power_integral_j, span_energy_j
from radt_ext.store import timelines
from radt_ext.workload_api.markers import TAG_MONITOR_RUN
from tests.radt_ext.helpers import radt

TRACE = Path(__file__).resolve().parents[3] / "listeners" / "traces" / "h100_power_samples.json"


def _history(client, run_id, key):
    """The timeline at its full rate (the run's timeline artifact)."""
    return sorted((m.timestamp / 1000, m.value) for m in timelines.history(client, run_id, [key])[key])


def _recorded(uri: str, tmp_path, script: str, trace: str) -> tuple:
    """`radt-ext run -l nvml` of the script on the trace: the store's client, radt-ext's own run and
    the runs the script opened, by name."""
    path = tmp_path / "train.py"
    path.write_text(script)
    res = radt("run", "-l", "nvml", "--", sys.executable, str(path), env={nvml_backend.REPLAY_ENV: trace},
               timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    monitor = next(r for r in runs if TAG_MONITOR_RUN not in r.data.tags)
    return client, monitor, {r.info.run_name: r for r in runs if TAG_MONITOR_RUN in r.data.tags}


def test_short_runs_the_script_opens_get_counter_energy_of_their_own_span(tracking_uri, tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    client, monitor, mine = _recorded(tracking_uri, tmp_path, textwrap.dedent("""
        import time, mlflow
        time.sleep(1.0)
        for name, seconds in (("two", 2.0), ("five", 5.0)):   # both shorter than the counter's period
            with mlflow.start_run(run_name=name):
                time.sleep(seconds)
        time.sleep(0.5)
    """), str(TRACE))
    energy = _history(client, monitor.info.run_id, "system/gpu0_energy_j")
    power = _history(client, monitor.info.run_id, "system/gpu0_power_w")
    times, values = [t for t, _ in energy], [e for _, e in energy]
    # radt-ext's run: the counter read at open and close only (~10 s), the course in between at >= 1 point a second
    assert max(b - a for a, b in zip(times, times[1:])) <= 1.0
    assert values == sorted(values) and values[0] == 0.0
    assert monitor.data.metrics["summary/e2e_gpu_total_energy_j"] == pytest.approx(values[-1])
    # the replay's counter and its power samples come from different moments of the recording: the
    # series follows the counter, so each run's energy is its power integral times the session's ratio
    ratio = values[-1] / power_integral_j(power, times[0], times[-1])
    for name, rel in (("two", 0.03), ("five", 0.01)):
        run = mine[name]
        start, end = run.info.start_time / 1000, run.info.end_time / 1000
        got = run.data.metrics["summary/e2e_gpu_total_energy_j"]
        assert got > 0, name
        assert got == pytest.approx(span_energy_j(times, values, start, end)[0], rel=5e-3)  # the one function (the store keeps ms)
        assert got == pytest.approx(power_integral_j(power, start, end) * ratio, rel=rel), name
        own = _history(client, run.info.run_id, "system/gpu0_energy_j")
        assert own and all(start <= t <= end for t, _ in own)  # its timeline's points of its own span


def test_a_short_run_on_two_gpus_without_sample_buffers_gets_both_gpus_energy(tracking_uri, tmp_path, monkeypatch):
    """Where the driver keeps no power samples the counter's reads (open and close) are the series; a run
    the script opens between them still gets its share of both GPUs' counters, never 0."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    client, monitor, opened = _recorded(
        tracking_uri, tmp_path, "import time, mlflow\ntime.sleep(0.5)\nwith mlflow.start_run(run_name='short'):\n"
        "    time.sleep(2.0)\ntime.sleep(0.5)\n", str(TRACE.parent / "h200x2_derived.json"))
    short = opened["short"]
    start, end = short.info.start_time / 1000, short.info.end_time / 1000
    expected = 0.0
    for gpu in (0, 1):
        energy = _history(client, monitor.info.run_id, f"system/gpu{gpu}_energy_j")
        assert len(energy) >= 2
        expected += span_energy_j([t for t, _ in energy], [e for _, e in energy], start, end)[0]
    assert expected > 0
    assert short.data.metrics["summary/e2e_gpu_total_energy_j"] == pytest.approx(expected, rel=5e-3)


def test_a_run_the_script_opens_on_two_gpus_gets_each_gpus_energy_and_named_totals(tracking_uri, tmp_path, monkeypatch):
    """On the trace recorded on two H100s (GPU 1 loaded, both with the driver's power samples): a 5 s run
    the script opens gets each GPU's energy over its own span, the total is their sum, the average power
    the sum of the GPUs' averages and the peak the highest GPU's."""
    from tests.traces import TWO_GPUS

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    client, monitor, opened = _recorded(
        tracking_uri, tmp_path, "import time, mlflow\ntime.sleep(1.0)\nwith mlflow.start_run(run_name='five'):\n"
        "    time.sleep(5.0)\ntime.sleep(0.5)\n", TWO_GPUS)
    five = opened["five"]
    start, end = five.info.start_time / 1000, five.info.end_time / 1000
    got = five.data.metrics
    for gpu in (0, 1):
        energy = _history(client, monitor.info.run_id, f"system/gpu{gpu}_energy_j")
        expected = span_energy_j([t for t, _ in energy], [e for _, e in energy], start, end)[0]
        assert expected > 0 and got[f"summary/e2e_gpu{gpu}_energy_j"] == pytest.approx(expected, rel=5e-3)
    assert got["summary/e2e_gpu_total_energy_j"] == pytest.approx(
        got["summary/e2e_gpu0_energy_j"] + got["summary/e2e_gpu1_energy_j"])
    assert got["summary/e2e_gpu_total_avg_power_w"] == pytest.approx(
        got["summary/e2e_gpu0_avg_power_w"] + got["summary/e2e_gpu1_avg_power_w"])
    assert got["summary/e2e_gpu_max_peak_power_w"] == max(
        got["summary/e2e_gpu0_peak_power_w"], got["summary/e2e_gpu1_peak_power_w"])
