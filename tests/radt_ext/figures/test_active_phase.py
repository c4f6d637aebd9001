"""The active phase of a run, from each source, through `radt-ext run` with real child processes and a
real SQLite store (the nvml listener replays a real H200 recording, so GPU figures exist)."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import radt

TRACE = str(Path(__file__).resolve().parents[3] / "listeners" / "traces" / "h200_matmul.json")
START_UP_S = 1.5  # what each script sleeps before its work: the start-up the summaries leave out

WORK = """
def work(seconds, batch=32):
    t = time.time()
    while time.time() - t < seconds:
        radt_ext.log_progress(samples=batch, steps=1)
        time.sleep(0.01)
"""


def run_script(body: str, *extra: str):
    script = "import time, radt_ext, mlflow\n" + textwrap.dedent(WORK) + textwrap.dedent(body)
    res = radt("run", "--listeners", "top,nvml", "--interval", "0.1", *extra, "--", sys.executable, "-c", script,
               env={"RADT_EXT_NVML_REPLAY": TRACE}, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def runs(uri):
    client = MlflowClient(uri)
    found = client.search_runs([e.experiment_id for e in client.search_experiments()],
                               order_by=["attributes.start_time ASC"])
    monitor = [r for r in found if "radt_ext.monitor_run_id" not in r.data.tags]
    assert len(monitor) == 1
    return monitor[0], [r for r in found if "radt_ext.monitor_run_id" in r.data.tags]


def check_window(m: dict, startup_at_least: float) -> None:
    """Start-up + active phase fit in the run; figures over the active phase differ from the whole run's."""
    assert m["summary/startup_s"] >= startup_at_least
    assert m["summary/startup_s"] + m["summary/active_s"] <= m["summary/e2e_duration_s"] + 1e-6
    assert m["summary/startup_share_pct"] == pytest.approx(100 * m["summary/startup_s"] / m["summary/e2e_duration_s"])
    assert m["summary/gpu_total_energy_j"] < m["summary/e2e_gpu_total_energy_j"]
    assert m["summary/gpu0_energy_j"] == pytest.approx(m["summary/gpu_total_energy_j"])


def test_progress_marks_the_active_phase(tracking_uri):
    run_script(f"time.sleep({START_UP_S})\nwork(1.0)\n")
    monitor, _ = runs(tracking_uri)
    m = monitor.data.metrics
    assert monitor.data.tags["radt_ext.active_source"] == "progress"
    check_window(m, START_UP_S)
    # samples over the active phase at the rate of the work, the whole run's diluted by the start-up
    assert m["summary/throughput_samples_per_s"] > 2 * m["summary/e2e_throughput_samples_per_s"]
    assert m["summary/samples"] <= m["summary/e2e_samples"]
    assert m["summary/energy_per_sample_j"] < m["summary/e2e_energy_per_sample_j"]


def test_phase_api_wins_over_progress_and_counts_each_phase(tracking_uri):
    run_script(f"""
        work(0.3)  # progress before the phase (warm-up) is not part of it
        time.sleep({START_UP_S})
        with radt_ext.phase("train"):
            work(1.0)
        with radt_ext.phase("eval"):
            time.sleep(0.4)
    """)
    monitor, _ = runs(tracking_uri)
    m = monitor.data.metrics
    assert monitor.data.tags["radt_ext.active_source"] == "phase"
    check_window(m, START_UP_S)
    assert m["summary/phase_train_s"] >= 1.0 and m["summary/phase_eval_s"] >= 0.4
    assert m["summary/active_s"] >= m["summary/phase_train_s"] + m["summary/phase_eval_s"] - 1e-6
    assert m["summary/samples"] < m["summary/e2e_samples"]  # the warm-up's samples are outside


LOGGING = f"""
    with mlflow.start_run(run_name="trainer"):
        time.sleep({START_UP_S})
        for step in range(6):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
            time.sleep(0.2)
        time.sleep(0.5)
"""  # a run the script opens, logging a metric for six steps after its start-up


def test_logged_metrics_of_a_run_the_script_opens(tracking_uri):
    run_script(LOGGING)
    monitor, opened = runs(tracking_uri)
    assert len(opened) == 1
    trainer = opened[0]
    m = trainer.data.metrics
    # the script's metric steps are its progress (the start-up hook counts them as they are logged)
    assert trainer.data.tags["radt_ext.active_source"] == "progress"
    assert monitor.data.tags["radt_ext.progress_source"] == "mlflow-steps"
    history = MlflowClient(tracking_uri).get_metric_history(trainer.info.run_id, "loss")
    stamps = sorted(h.timestamp / 1000 for h in history)
    assert m["summary/active_s"] == pytest.approx(stamps[-1] - stamps[0], abs=0.05)
    assert m["summary/startup_s"] == pytest.approx(stamps[0] - trainer.info.start_time / 1000, abs=0.05)
    check_window(m, START_UP_S)
    # radt-ext's own run: the same span, from the run its workload opened
    assert monitor.data.tags["radt_ext.active_source"] == "progress"
    assert monitor.data.metrics["summary/active_s"] == pytest.approx(m["summary/active_s"], abs=1e-3)


def test_without_the_hook_the_run_s_logged_metrics_give_the_active_phase(tracking_uri, monkeypatch):
    monkeypatch.setenv("RADT_EXT_NO_PROGRESS", "1")
    run_script(LOGGING)
    monitor, (trainer,) = runs(tracking_uri)
    m = trainer.data.metrics
    assert trainer.data.tags["radt_ext.active_source"] == "logged_metrics"
    history = MlflowClient(tracking_uri).get_metric_history(trainer.info.run_id, "loss")
    stamps = sorted(h.timestamp / 1000 for h in history)
    assert m["summary/active_s"] == pytest.approx(stamps[-1] - stamps[0], abs=1e-3)
    assert monitor.data.tags["radt_ext.active_source"] == "logged_metrics"


def test_runs_the_script_opens_each_get_their_own_active_phase(tracking_uri):
    run_script("""
        with mlflow.start_run(run_name="first"):
            work(0.8)
        with mlflow.start_run(run_name="second"):
            time.sleep(1.0)
            work(0.8, batch=64)
    """)
    monitor, opened = runs(tracking_uri)
    first, second = sorted(opened, key=lambda r: r.info.start_time)
    for run in (first, second):
        assert run.data.tags["radt_ext.active_source"] == "progress"
    assert second.data.metrics["summary/startup_s"] >= 1.0 > first.data.metrics["summary/startup_s"]
    # each counts the samples of its own span only; radt-ext's run all of them
    total = monitor.data.metrics["summary/e2e_samples"]
    assert first.data.metrics["summary/e2e_samples"] + second.data.metrics["summary/e2e_samples"] == \
        pytest.approx(total, rel=0.05)
    assert second.data.metrics["summary/e2e_samples"] > first.data.metrics["summary/e2e_samples"]


def test_whole_run_when_the_workload_says_nothing(tracking_uri):
    run_script("time.sleep(0.5)\n")
    monitor, _ = runs(tracking_uri)
    m = monitor.data.metrics
    assert monitor.data.tags["radt_ext.active_source"] == "whole_run"
    assert m["summary/startup_s"] == 0.0 and m["summary/active_s"] == m["summary/e2e_duration_s"]
    assert m["summary/gpu_total_energy_j"] == m["summary/e2e_gpu_total_energy_j"]
    assert "summary/samples" not in m
