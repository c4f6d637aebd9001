"""The work of an unmodified script, end to end: `radt-ext run` of a real PyTorch training script that
imports nothing of radt-ext gets its samples, epochs, epoch figures, samples/s timeline and progress
source, a tensor-fed training loop its samples; `--no-progress`, a non-Python workload and a Python one
that imports no framework get none, each with its reason."""
import json
import os
import sys

import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import only_run, radt

pytest.importorskip("torch")
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "benchmarks", "progress", "unmodified", "loader_train.py")
ARGS = ["--device", "cpu", "--epochs", "3", "--samples", "96", "--batch", "16", "--workers", "0", "--work", "0"]


@pytest.mark.slow
def test_an_unmodified_training_script_gets_its_samples_and_epochs(tracking_uri):
    res = radt("run", "--listeners", "top", "--", sys.executable, SCRIPT, *ARGS, timeout=300)
    assert res.returncode == 0, res.stderr
    own = json.loads(res.stdout.strip().splitlines()[-1])  # what the script timed itself
    run = only_run(tracking_uri)
    m, tags = run.data.metrics, run.data.tags
    assert tags["radt_ext.progress_source"] == "torch", tags.get("radt_ext.progress_note")
    assert "optimizer steps" in tags["radt_ext.progress_note"]
    assert m["summary/e2e_samples"] == 3 * 96
    assert m["summary/epochs"] == 3
    assert tags["radt_ext.active_source"] == "progress"
    # the epochs radt-ext saw are the script's own, to within the time of a batch
    assert m["summary/first_epoch_time_s"] == pytest.approx(own["epoch_times_s"][0], rel=0.25, abs=0.3)
    assert m["summary/epoch_time_s"] == pytest.approx(sum(own["epoch_times_s"][1:]) / 2, rel=0.25, abs=0.3)
    assert m["summary/throughput_samples_per_s"] > 0
    rate = MlflowClient(tracking_uri).get_metric_history(run.info.run_id, "progress/throughput_samples_per_s")
    assert rate and all(p.value >= 0 for p in rate)


@pytest.mark.slow
def test_no_progress_and_a_non_python_workload_say_why(tracking_uri, tmp_path):
    res = radt("run", "--listeners", "top", "--no-progress", "--", sys.executable, SCRIPT, *ARGS, timeout=300)
    assert res.returncode == 0, res.stderr
    run = only_run(tracking_uri)
    assert run.data.tags["radt_ext.progress_source"] == "none"
    assert "--no-progress" in run.data.tags["radt_ext.progress_note"]
    assert "summary/samples" not in run.data.metrics and "summary/epochs" not in run.data.metrics

    other = f"sqlite:///{tmp_path / 'other.db'}"
    res = radt("run", "--listeners", "top", "--", "bash", "-c", "sleep 0.5", env={"MLFLOW_TRACKING_URI": other})
    assert res.returncode == 0, res.stderr
    run = only_run(other)
    assert run.data.tags["radt_ext.progress_source"] == "none"
    assert run.data.tags["radt_ext.progress_note"].startswith(
        "the start-up hook loaded in no process of the workload (not a Python workload")

    plain = f"sqlite:///{tmp_path / 'plain.db'}"
    res = radt("run", "--listeners", "top", "--", sys.executable, "-c", "import json", env={"MLFLOW_TRACKING_URI": plain})
    assert res.returncode == 0 and "start-up hook" not in res.stderr, res.stderr
    run = only_run(plain)
    assert run.data.tags["radt_ext.progress_note"] == (
        "the start-up hook loaded, but the workload imported no PyTorch, Keras or MLflow")


@pytest.mark.slow
def test_a_tensor_fed_training_loop_gets_its_samples_and_the_unit_named(tracking_uri):
    script = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "unmodified", "gru_train.py")
    res = radt("run", "--listeners", "top", "--", sys.executable, script, "--device", "cpu", "--tiny", "--batch", "8",
               "--steps", "30", timeout=300)
    assert res.returncode == 0, res.stderr
    assert "gru_train: 30 steps, 240 samples" in res.stdout
    run = only_run(tracking_uri)
    m, tags = run.data.metrics, run.data.tags
    assert tags["radt_ext.progress_source"] == "torch", tags.get("radt_ext.progress_note")
    assert "leading dimension of the input of the model the optimizer steps" in tags["radt_ext.progress_note"]
    assert m["summary/e2e_samples"] == 240 and m["summary/throughput_samples_per_s"] > 0
