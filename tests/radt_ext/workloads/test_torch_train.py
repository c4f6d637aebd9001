"""torch_train as a real child process writing to a real SQLite store (CPU, tiny settings)."""
import os
import subprocess
import sys

import mlflow
import pytest
from mlflow.tracking import MlflowClient

TINY = ["--epochs", "2", "--train-samples", "96", "--val-samples", "32", "--batch-size", "32",
        "--width", "4", "--infer-iters", "3"]


def train(*args, env_extra=None):
    return subprocess.run([sys.executable, "-m", "radt_ext.workloads.torch_train", *TINY, *args],
                          capture_output=True, text=True, timeout=300)


def only_run():
    runs = mlflow.search_runs(experiment_ids=["0"], output_format="list")
    assert len(runs) == 1
    return runs[0]


def test_baseline_records_params_tags_epochs_and_end_metrics(tracking_uri):
    done = train("--baseline-run-id", "feedbeef")
    assert done.returncode == 0, done.stderr
    assert "running on CPU (device=cpu)" in done.stderr and "MFU is n/a on CPU" in done.stderr
    run = only_run()
    assert run.info.status == "FINISHED"
    assert run.data.tags["recipe"] == "cnn_baseline" and run.data.tags["variant"] == "baseline"
    assert run.data.tags["baseline_run_id"] == "feedbeef"
    p = run.data.params
    assert (p["model"], p["dataset"], p["device"], p["precision"], p["batch_size"]) == ("small_cnn", "synthetic32", "cpu", "fp32", "32")
    for key in ("epochs", "sparsity", "prune_method", "quant_scheme", "compile_mode"):
        assert key in p
    m = run.data.metrics
    for key in ("final_accuracy", "inference_latency_p50_ms", "inference_latency_p95_ms", "inference_latency_p99_ms",
                "inference_throughput_samples_per_s", "model_size_bytes", "param_count", "nonzero_param_count",
                "achieved_tflops", "forward_flops_per_sample"):
        assert key in m
    assert "mfu_ratio" not in m  # n/a on CPU
    # where the time before the first training step went, from the process start
    phases = ("import", "device", "data", "model", "optimizer", "first_forward", "first_step")
    assert all(m[f"startup_{p}_s"] >= 0 for p in phases)
    assert sum(m[f"startup_{p}_s"] for p in phases) == pytest.approx(m["startup_to_first_step_s"], abs=0.01)
    assert run.data.tags["startup.split"].startswith("first step ") and "first step" in done.stderr
    history = mlflow.MlflowClient().get_metric_history(run.info.run_id, "val_loss")
    assert [h.step for h in history] == [0, 1]
    for key in ("train_loss", "train_accuracy", "val_accuracy", "epoch_time_s", "samples_per_s", "epoch_end_time_s"):
        assert len(mlflow.MlflowClient().get_metric_history(run.info.run_id, key)) == 2


def test_early_stopping_stops_and_says_so(tracking_uri):
    # lr so large that val loss cannot keep improving: patience 1 stops well before 6 epochs.
    done = train("--epochs", "6", "--patience", "1", "--lr", "5", "--epochs", "6")
    assert done.returncode == 0, done.stderr
    m = only_run().data.metrics
    assert m["epochs_run"] < 6 and "stopped_epoch" in m
    assert "early stopping after epoch" in done.stderr


def test_pruned_unstructured_reports_zeroed_weights(tracking_uri):
    done = train("--variant", "pruned", "--sparsity", "0.6", "--finetune-epochs", "1", "--recipe", "cnn_pruned")
    assert done.returncode == 0, done.stderr
    m = only_run().data.metrics
    assert m["nonzero_param_count"] < 0.5 * m["param_count"] and m["epochs_run"] == 3


def test_quantized_static_int8_compares_with_fp32_on_cpu(tracking_uri):
    done = train("--variant", "quantized", "--dataset", "digits", "--recipe", "cnn_quantized")
    assert done.returncode == 0, done.stderr
    m = only_run().data.metrics
    assert {"fp32_accuracy", "accuracy_drop_pts", "quantized_speedup_ratio"} <= set(m)
    assert m["model_size_bytes"] > 0


def test_dlrm_on_synthetic_clicks(tracking_uri):
    done = train("--model", "dlrm", "--dataset", "clicks", "--table-rows", "500", "--num-tables", "3",
                 "--embedding-dim", "8", "--recipe", "dlrm_baseline")
    assert done.returncode == 0, done.stderr
    run = only_run()
    assert run.data.params["table_rows"] == "500" and run.data.tags["recipe"] == "dlrm_baseline"


@pytest.mark.parametrize("args,needle", [
    (["--variant", "amp", "--precision", "fp32"], "variant=amp trains in bf16 or fp16"),
    (["--variant", "pruned", "--prune-method", "semi24"], "compute capability >= 8.0"),
    (["--variant", "quantized", "--quant-scheme", "fp8"], "compute capability >= 8.9"),
    (["--model", "dlrm"], "model=dlrm goes with dataset=clicks"),
    (["--data", "/no/such/folder"], "is not a folder"),
])
def test_bad_input_gets_one_line_and_gpu_only_variants_refuse_before_a_run(tracking_uri, args, needle):
    done = train(*args)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and needle in errors[0], done.stderr
    assert "Traceback" not in done.stderr


def test_user_image_folder_via_data(tracking_uri, tmp_path):
    from PIL import Image

    for cls, colour in (("cats", (200, 30, 30)), ("dogs", (30, 30, 200))):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for i in range(6):
            Image.new("RGB", (20, 20), tuple(c + i for c in colour)).save(tmp_path / "imgs" / cls / f"{i}.png")
    done = train("--data", str(tmp_path / "imgs"), "--image-size", "16", "--batch-size", "4")
    assert done.returncode == 0, done.stderr
    run = only_run()
    assert run.data.params["dataset"] == "folder" and run.data.params["train_set_size"] == "10"
    assert run.data.params["data"] == str(tmp_path / "imgs")


def test_a_model_of_its_own_builds_without_importing_torchvision():
    # torchvision's import costs seconds before the first step: only the models defined there pay it
    code = ("import sys; from radt_ext.workloads import torch_models as m; m.build('small_cnn', 10, (3, 32, 32)); "
            "m.build('resnet18', 10, (3, 32, 32)); assert 'torchvision' not in sys.modules; "
            "m.build('resnet50', 10, (3, 32, 32)); assert 'torchvision' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_epochs_after_the_first_are_the_marked_phase(tracking_uri, tmp_path):
    """Epoch 1 (warm-up) is left outside the `train` phase: the active phase is the steady epochs'."""
    from radt_ext.figures import active
    from radt_ext.workload_api.progress import ENV, read_marks

    progress = tmp_path / "progress.jsonl"
    done = subprocess.run([sys.executable, "-m", "radt_ext.workloads.torch_train", *TINY, "--epochs", "3"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, ENV: str(progress)})
    assert done.returncode == 0, done.stderr
    marks = read_marks(str(progress))
    assert [(name, event) for _, name, event in marks.phases] == [("train", "start"), ("train", "end")] * 2
    run = only_run()
    ends = [m.value for m in sorted(MlflowClient().get_metric_history(run.info.run_id, "epoch_end_time_s"),
                                    key=lambda m: m.step)]
    first, last = marks.phase_span()
    assert len(ends) == 3 and ends[0] < first < ends[1] and last >= ends[2] - 0.01  # epochs 2-3; epoch 1 outside
    assert marks.progress_times()[0] < first  # epoch 1's progress comes before the phase
    window = active.find(marks.progress_times()[0] - 1, last + 1, marks)
    assert (window.source, window.start, window.end) == ("phase", first, last)
