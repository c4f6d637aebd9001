"""Every TensorFlow recipe runs a tiny configuration on CPU and its run holds the recipe's records.

tf_baseline goes through `mlflow run --env-manager local` exactly as a user types it (listeners
included). Loading TensorFlow takes seconds of a CI core, so the other four run their MLproject's
own command line (parameters filled by MLflow's project loader) in this one test process: the
part after `radt-ext run --` is handed to tf_train's entry point, which writes to a real SQLite
store as it does under the session.
"""
import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

import radt_ext.workloads.tf_train  # noqa: F401  sets TF_USE_LEGACY_KERAS before any test loads TensorFlow

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                reason="TensorFlow is not installed; pip install 'radt-ext[tensorflow]'")

REPO = Path(__file__).resolve().parents[2]
RECIPES = ["tf_baseline", "tf_xla", "tf_mixed", "tf_pruned", "tf_quantized"]
TINY = {"epochs": "1", "train_samples": "64", "val_samples": "32", "batch_size": "32", "infer_iters": "3",
        "dataset": "synthetic32"}
EXTRA = {"tf_quantized": {"calibration_batches": "2", "dataset": "digits8"}, "tf_pruned": {"sparsity": "0.6"}}
END_METRICS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "epoch_time_s", "samples_per_s",
               "epoch_start_time_s", "epoch_end_time_s", "final_accuracy", "inference_latency_p50_ms",
               "inference_latency_p95_ms", "inference_latency_p99_ms", "inference_throughput_samples_per_s",
               "model_size_bytes", "param_count", "nonzero_param_count", "achieved_tflops", "forward_flops_per_sample")


def params_for(recipe):
    return {**TINY, **EXTRA.get(recipe, {})}


def the_run():
    runs = mlflow.search_runs(experiment_ids=["0"], output_format="list")
    assert len(runs) == 1
    return runs[0]


def check_records(recipe):
    run = the_run()
    assert run.info.status == "FINISHED"
    assert run.data.tags["recipe"] == recipe
    assert run.data.tags["variant"] == recipe.removeprefix("tf_")
    assert run.data.tags["baseline_run_id"] == "cafe01"
    p = run.data.params
    for key in ("model", "dataset", "batch_size", "epochs", "precision", "sparsity", "prune_method",
                "quant_scheme", "compile_mode", "device", "tensorflow_version"):
        assert key in p, key
    assert (p["device"], p["framework"], p["batch_size"]) == ("cpu", "tensorflow", "32")
    m = run.data.metrics
    for key in END_METRICS:
        assert key in m, key
    assert "mfu_ratio" not in m  # n/a on CPU
    assert m["epochs_run"] == float(p["epochs"]) + float(p["finetune_epochs"])
    return run


def test_tf_baseline_through_mlflow_run_with_local_env_manager(tracking_uri):
    params = {**params_for("tf_baseline"), "baseline_run_id": "cafe01"}
    args = [a for k, v in params.items() for a in ("-P", f"{k}={v}")]
    done = subprocess.run([sys.executable, "-m", "mlflow", "run", "recipes/tf_baseline", "--env-manager", "local", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = check_records("tf_baseline")
    assert "summary/duration_s" in run.data.metrics  # the listeners' session wrapped the workload
    assert run.data.metrics["summary/samples"] == 64  # log_progress every step: 1 epoch x 2 batches of 32
    assert run.data.params["compile_mode"] == "none" and run.data.params["precision"] == "fp32"
    assert "running on CPU (device=cpu)" in done.stderr


def run_entry_point(recipe, tmp_path, **overrides):
    """The recipe's MLproject command with its parameters filled by MLflow, minus the
    `radt-ext run --` wrapper, run by tf_train's click command in this process."""
    from mlflow.projects._project_spec import load_project

    from radt_ext.workloads import tf_train

    project = load_project(str(REPO / "recipes" / recipe))
    params = {**params_for(recipe), "baseline_run_id": "cafe01", **overrides}
    command = shlex.split(project.get_entry_point("main").compute_command(params, str(tmp_path)))
    assert command[:3] == ["radt-ext", "run", "--"] and command[3:6] == ["python", "-m", "radt_ext.workloads.tf_train"]
    tf_train.main(command[6:], standalone_mode=False)


def test_tf_xla_compiles_with_jit(tracking_uri, tmp_path):
    run_entry_point("tf_xla", tmp_path)
    assert check_records("tf_xla").data.params["compile_mode"] == "xla"


def test_tf_mixed_trains_under_a_bfloat16_policy_and_leaves_none_behind(tracking_uri, tmp_path):
    from radt_ext.workloads.tf_models import keras

    run_entry_point("tf_mixed", tmp_path)
    run = check_records("tf_mixed")
    assert (run.data.params["precision"], run.data.params["mixed_precision_policy"]) == ("bf16", "mixed_bfloat16")
    assert keras().mixed_precision.global_policy().name == "float32"


def test_tf_pruned_zeroes_weights_with_prune_low_magnitude(tracking_uri, tmp_path):
    run_entry_point("tf_pruned", tmp_path)
    run = check_records("tf_pruned")
    m = run.data.metrics
    # conv and dense kernels hold nearly all weights; 60% of them are zero after fine-tuning
    assert m["nonzero_param_count"] < 0.5 * m["param_count"]
    assert m["model_gzip_size_bytes"] < m["dense_model_gzip_size_bytes"]
    assert run.data.params["prune_method"] == "unstructured" and run.data.params["sparsity"] == "0.6"
    assert "logits" in run.data.tags["pruned_layers"]


def test_tf_quantized_int8_tflite_against_fp32_tflite(tracking_uri, tmp_path):
    run_entry_point("tf_quantized", tmp_path)
    run = check_records("tf_quantized")
    m = run.data.metrics
    assert {"fp32_accuracy", "accuracy_drop_pts", "quantized_speedup_ratio", "fp32_inference_latency_p50_ms"} <= set(m)
    assert m["model_size_bytes"] < 0.5 * m["fp32_model_size_bytes"]  # int8 weights: a quarter, plus the graph
    assert run.data.params["quant_scheme"] == "static_int8"


def test_every_tf_recipe_is_thin_and_installs_the_tensorflow_extra():
    for recipe in RECIPES:
        folder = REPO / "recipes" / recipe
        assert sorted(p.name for p in folder.iterdir()) == ["MLproject", "python_env.yaml", "radt-ext"]
        assert (folder / "radt-ext").resolve() == REPO
        env = (folder / "python_env.yaml").read_text()
        assert 'python: "3.11.7"' in env and "./radt-ext[tensorflow]" in env
        text = (folder / "MLproject").read_text()
        assert f"radt-ext run -- python -m radt_ext.workloads.tf_train --recipe {recipe} " in text
