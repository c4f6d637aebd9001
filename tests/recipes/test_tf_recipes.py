"""Every TensorFlow recipe runs a tiny configuration on CPU and its run holds the recipe's records.

tf_baseline goes through `mlflow run --env-manager local` exactly as a user types it (listeners
included). Loading TensorFlow takes seconds of a CI core, so the other four run their MLproject's
own command line (parameters filled by MLflow's project loader) in this one test process: the
part after `radt-ext run --` is handed to tf_train's entry point, which writes to a real SQLite
store as it does under the session.
"""
import importlib.util
import shlex

import pytest

import radt_ext.workloads.tf_train  # noqa: F401  sets TF_USE_LEGACY_KERAS before any test loads TensorFlow
from tests.recipes.helpers import REPO, check_common_records, check_thin_recipe, mlflow_run, tiny_params

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                                reason="TensorFlow is not installed; pip install 'radt-ext[tensorflow]'")

RECIPES = ["tf_baseline", "tf_xla", "tf_mixed", "tf_pruned", "tf_quantized"]
EXTRA = {"tf_quantized": {"calibration_batches": "2", "dataset": "digits8"}, "tf_pruned": {"sparsity": "0.6"}}
MORE_METRICS = ("train_accuracy", "val_loss", "epoch_start_time_s", "achieved_tflops", "forward_flops_per_sample")


def check_records(recipe):
    run = check_common_records(recipe, recipe.removeprefix("tf_"), params=["tensorflow_version"], metrics=MORE_METRICS)
    assert run.data.tags["baseline_run_id"] == "cafe01"
    p, m = run.data.params, run.data.metrics
    assert (p["framework"], p["batch_size"]) == ("tensorflow", "32")
    assert "mfu_ratio" not in m  # n/a on CPU
    assert m["epochs_run"] == float(p["epochs"]) + float(p["finetune_epochs"])
    return run


def test_tf_baseline_through_mlflow_run_with_local_env_manager(tracking_uri):
    params = {**tiny_params("tf_baseline", EXTRA), "baseline_run_id": "cafe01"}
    done = mlflow_run("tf_baseline", params, "--env-manager", "local")
    run = check_records("tf_baseline")
    assert "summary/e2e_duration_s" in run.data.metrics  # the listeners' session wrapped the workload
    assert run.data.metrics["summary/e2e_samples"] == 64  # log_progress every step: 1 epoch x 2 batches of 32
    # the active phase runs from the first progress record to the last: the second batch's samples
    assert run.data.metrics["summary/samples"] == 32 and run.data.tags["radt_ext.active_source"] == "progress"
    assert run.data.params["compile_mode"] == "none" and run.data.params["precision"] == "fp32"
    assert "running on CPU (device=cpu)" in done.stderr


def run_entry_point(recipe, tmp_path, **overrides):
    """The recipe's MLproject command with its parameters filled by MLflow, minus the
    `radt-ext run --` wrapper, run by tf_train's click command in this process."""
    from mlflow.projects._project_spec import load_project

    from radt_ext.workloads import tf_train

    project = load_project(str(REPO / "recipes" / recipe))
    params = {**tiny_params(recipe, EXTRA), "baseline_run_id": "cafe01", **overrides}
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
        check_thin_recipe(recipe, "tensorflow", f"radt-ext run -- python -m radt_ext.workloads.tf_train --recipe {recipe} ")
