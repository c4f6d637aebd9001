"""Every recipe runs a tiny configuration on CPU and its run holds the recipe's records.

Two go through `mlflow run --env-manager local` exactly as a user types it; the rest run the
command MLflow would run (their MLproject's entry point, parameters filled by MLflow's own
project loader) to keep CI within seconds per recipe. The virtualenv manager is exercised by
one slow test, skipped unless RADT_EXT_SLOW=1 (it installs torch into a new environment).
"""
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest

REPO = Path(__file__).resolve().parents[2]
RECIPES = ["cnn_baseline", "cnn_amp", "cnn_compiled", "cnn_pruned", "cnn_quantized", "vit_baseline", "dlrm_baseline"]
TINY = {"epochs": "1", "train_samples": "64", "val_samples": "32", "batch_size": "32", "infer_iters": "3",
        "dataset": "synthetic32"}
EXTRA = {
    "cnn_compiled": {"compile_backend": "aot_eager"},  # the inductor C++ build takes minutes on 2 cores
    "dlrm_baseline": {"dataset": "clicks", "table_rows": "500", "num_tables": "4", "embedding_dim": "8"},
    "cnn_quantized": {"calibration_batches": "2"},
}
EXPECTED_VARIANT = {"cnn_amp": "amp", "cnn_compiled": "compiled", "cnn_pruned": "pruned", "cnn_quantized": "quantized"}


@pytest.fixture
def store(tracking_uri, tmp_path, monkeypatch):
    """The SQLite store, created here so experiment 0 keeps its artifacts under tmp_path
    (MLflow puts them in ./mlruns of whichever process creates the store)."""
    monkeypatch.chdir(tmp_path)
    mlflow.MlflowClient().get_experiment("0")
    return tracking_uri


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
    assert run.data.tags["variant"] == EXPECTED_VARIANT.get(recipe, "baseline")
    for key in ("model", "dataset", "batch_size", "epochs", "precision", "sparsity", "prune_method",
                "quant_scheme", "compile_mode", "device"):
        assert key in run.data.params, key
    assert run.data.params["device"] == "cpu"
    m = run.data.metrics
    for key in ("train_loss", "val_accuracy", "epoch_time_s", "samples_per_s", "epoch_end_time_s", "final_accuracy",
                "inference_latency_p50_ms", "inference_latency_p95_ms", "inference_latency_p99_ms",
                "inference_throughput_samples_per_s", "model_size_bytes", "param_count", "nonzero_param_count"):
        assert key in m, key
    assert "summary/duration_s" in m  # the listeners' session wrapped the workload
    return run


@pytest.mark.parametrize("recipe", ["cnn_pruned", "cnn_quantized"])
def test_mlflow_run_with_local_env_manager(store, recipe):
    args = [a for k, v in params_for(recipe).items() for a in ("-P", f"{k}={v}")]
    done = subprocess.run([sys.executable, "-m", "mlflow", "run", f"recipes/{recipe}", "--env-manager", "local", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = check_records(recipe)
    if recipe == "cnn_pruned":
        assert run.data.metrics["nonzero_param_count"] < run.data.metrics["param_count"]
    else:
        assert "accuracy_drop_pts" in run.data.metrics


@pytest.mark.parametrize("recipe", ["cnn_baseline", "cnn_amp", "cnn_compiled", "vit_baseline", "dlrm_baseline"])
def test_recipe_entry_point_command(store, tmp_path, recipe):
    from mlflow.projects._project_spec import load_project

    project = load_project(str(REPO / "recipes" / recipe))
    command = project.get_entry_point("main").compute_command(params_for(recipe), str(tmp_path))
    done = subprocess.run(["bash", "-c", command], cwd=REPO / "recipes" / recipe, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    check_records(recipe)


def test_every_recipe_is_thin_and_installs_the_package_offline():
    for recipe in RECIPES:
        folder = REPO / "recipes" / recipe
        assert sorted(p.name for p in folder.iterdir()) == ["MLproject", "python_env.yaml", "radt-ext"]
        assert (folder / "radt-ext").resolve() == REPO
        env = (folder / "python_env.yaml").read_text()
        assert 'python: "3.11.7"' in env and "./radt-ext[torch]" in env
        assert "radt-ext run -- python -m radt_ext.workloads.torch_train" in (folder / "MLproject").read_text()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("RADT_EXT_SLOW") != "1", reason="set RADT_EXT_SLOW=1: builds a virtualenv with torch (minutes)")
def test_mlflow_run_with_default_virtualenv_manager(store):
    done = subprocess.run([sys.executable, "-m", "mlflow", "run", "recipes/cnn_pruned",
                           *[a for k, v in TINY.items() for a in ("-P", f"{k}={v}")]],
                          cwd=REPO, capture_output=True, text=True, timeout=3000)
    assert done.returncode == 0, done.stderr[-3000:]
    check_records("cnn_pruned")
