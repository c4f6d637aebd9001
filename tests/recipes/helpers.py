"""What the torch and TensorFlow recipe tests share: the tiny settings, the one run a recipe
leaves, the records every recipe writes, `mlflow run` of a recipe folder, and its thin layout."""
import subprocess
import sys
from pathlib import Path

import mlflow

REPO = Path(__file__).resolve().parents[2]
TINY = {"epochs": "1", "train_samples": "64", "val_samples": "32", "batch_size": "32", "infer_iters": "3",
        "dataset": "synthetic32"}
PARAMS = ("model", "dataset", "batch_size", "epochs", "precision", "sparsity", "prune_method", "quant_scheme",
          "compile_mode", "device")
METRICS = ("train_loss", "val_accuracy", "epoch_time_s", "samples_per_s", "epoch_end_time_s", "final_accuracy",
           "inference_latency_p50_ms", "inference_latency_p95_ms", "inference_latency_p99_ms",
           "inference_throughput_samples_per_s", "model_size_bytes", "param_count", "nonzero_param_count")


def tiny_params(recipe, extra):
    """TINY with the recipe's own overrides from `extra` (recipe -> params)."""
    return {**TINY, **extra.get(recipe, {})}


def the_run():
    runs = mlflow.search_runs(experiment_ids=["0"], output_format="list")
    assert len(runs) == 1
    return runs[0]


def check_common_records(recipe, variant, params=(), metrics=()):
    """The one run finished with the recipe's tags, the params and metrics every recipe logs
    (plus `params` and `metrics`), on CPU; returns it."""
    run = the_run()
    assert run.info.status == "FINISHED"
    assert run.data.tags["recipe"] == recipe
    assert run.data.tags["variant"] == variant
    for key in (*PARAMS, *params):
        assert key in run.data.params, key
    assert run.data.params["device"] == "cpu"
    for key in (*METRICS, *metrics):
        assert key in run.data.metrics, key
    return run


def mlflow_run(recipe, params, *options, timeout=600):
    """`mlflow run recipes/<recipe> [options] -P k=v ...` from the repository root; must succeed."""
    args = [a for k, v in params.items() for a in ("-P", f"{k}={v}")]
    done = subprocess.run([sys.executable, "-m", "mlflow", "run", f"recipes/{recipe}", *options, *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def check_thin_recipe(recipe, extra, command):
    """The recipe folder holds only its MLproject, its python_env (installing the package with
    `extra` offline, through the link to the repository) and that link; MLproject runs `command`."""
    folder = REPO / "recipes" / recipe
    assert sorted(p.name for p in folder.iterdir()) == ["MLproject", "python_env.yaml", "radt-ext"]
    assert (folder / "radt-ext").resolve() == REPO
    env = (folder / "python_env.yaml").read_text()
    assert 'python: "3.11.7"' in env and f"./radt-ext[{extra}]" in env
    assert command in (folder / "MLproject").read_text()
