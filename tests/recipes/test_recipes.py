"""Every recipe runs a tiny configuration on CPU and its run holds the recipe's records.

Two go through `mlflow run --env-manager local` exactly as a user types it; the rest run the
command MLflow would run (their MLproject's entry point, parameters filled by MLflow's own
project loader) to keep CI within seconds per recipe. The virtualenv manager is exercised by
one slow test, skipped unless RADT_EXT_SLOW=1 (it installs torch into a new environment).
"""
import os
import subprocess

import mlflow
import pytest

from tests.recipes.helpers import REPO, TINY, check_common_records, check_thin_recipe, mlflow_run, tiny_params

RECIPES = ["cnn_baseline", "cnn_amp", "cnn_compiled", "cnn_pruned", "cnn_quantized", "vit_baseline", "dlrm_baseline"]
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


def check_records(recipe):
    # every torch recipe's MLproject wraps the workload in the listeners' session
    return check_common_records(recipe, EXPECTED_VARIANT.get(recipe, "baseline"), metrics=["summary/e2e_duration_s"])


@pytest.mark.parametrize("recipe", ["cnn_pruned", "cnn_quantized"])
def test_mlflow_run_with_local_env_manager(store, recipe):
    mlflow_run(recipe, tiny_params(recipe, EXTRA), "--env-manager", "local")
    run = check_records(recipe)
    if recipe == "cnn_pruned":
        assert run.data.metrics["nonzero_param_count"] < run.data.metrics["param_count"]
    else:
        assert "accuracy_drop_pts" in run.data.metrics


@pytest.mark.parametrize("recipe", ["cnn_baseline", "cnn_amp", "cnn_compiled", "vit_baseline", "dlrm_baseline"])
def test_recipe_entry_point_command(store, tmp_path, recipe):
    from mlflow.projects._project_spec import load_project

    project = load_project(str(REPO / "recipes" / recipe))
    command = project.get_entry_point("main").compute_command(tiny_params(recipe, EXTRA), str(tmp_path))
    done = subprocess.run(["bash", "-c", command], cwd=REPO / "recipes" / recipe, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    check_records(recipe)


def test_every_recipe_is_thin_and_installs_the_package_offline():
    for recipe in RECIPES:
        check_thin_recipe(recipe, "torch", "radt-ext run -- python -m radt_ext.workloads.torch_train")


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("RADT_EXT_SLOW") != "1", reason="set RADT_EXT_SLOW=1: builds a virtualenv with torch (minutes)")
def test_mlflow_run_with_default_virtualenv_manager(store):
    mlflow_run("cnn_pruned", TINY, timeout=3000)
    check_records("cnn_pruned")
