"""records: early stopping, percentiles, utilisation, RunRecord and TrainingLog against a real SQLite store."""
import mlflow
import pytest

from radt_ext.workloads.records import (EarlyStopping, RunRecord, TrainingLog, latency_summary, percentile,
                                       table_peak_tflops, utilisation)


def test_early_stopping_waits_patience_epochs_without_improvement():
    stop = EarlyStopping(patience=2, min_delta=0.01)
    assert [stop.update(i, loss) for i, loss in enumerate([1.0, 0.9, 0.895, 0.95])] == [False, False, False, True]
    assert (stop.best, stop.best_epoch) == (0.9, 1)


def test_early_stopping_off_never_stops():
    stop = EarlyStopping(patience=0)
    assert not any(stop.update(i, 1.0) for i in range(10))


def test_percentile_interpolates_like_numpy():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([3.0], 95) == 3.0


def test_latency_summary_reports_ms_and_throughput():
    out = latency_summary([0.010, 0.020, 0.030, 0.040], batch_size=8)
    assert out["inference_latency_p50_ms"] == pytest.approx(25.0)
    assert out["inference_latency_p99_ms"] <= 40.0 + 1e-9
    assert out["inference_throughput_samples_per_s"] == pytest.approx(32 / 0.1)


def test_utilisation_needs_a_peak_for_mfu():
    assert utilisation(2e12, 1.0, None) == {"achieved_tflops": 2.0}
    assert utilisation(2e12, 1.0, 4.0)["mfu_ratio"] == pytest.approx(0.5)
    assert utilisation(0, 1.0, 4.0) == {}


def test_peak_table_matches_device_names():
    assert table_peak_tflops("NVIDIA H200", "bf16") == pytest.approx(989.5)
    assert table_peak_tflops("Some CPU", "bf16") is None


def test_run_record_creates_and_finishes_its_own_run(tracking_uri):
    rec = RunRecord("cnn_amp", "amp", baseline_run_id="abc")
    rec.log_params({"batch_size": 64, "lr": 0.001, "channels_last": False})
    rec.log_epoch(0, 100.0, 102.0, 256, {"train_loss": 1.5})
    rec.log_metrics({"final_accuracy": 0.9, "not_a_number": float("nan")})
    rec.finish()
    run = mlflow.get_run(rec.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["recipe"] == "cnn_amp" and run.data.tags["baseline_run_id"] == "abc"
    assert run.data.params == {"batch_size": "64", "lr": "0.001", "channels_last": "false"}
    assert run.data.metrics["samples_per_s"] == pytest.approx(128.0)
    assert run.data.metrics["epoch_end_time_s"] == pytest.approx(102.0)
    assert "not_a_number" not in run.data.metrics


def test_run_record_joins_a_handed_run_and_keeps_its_params(tracking_uri, monkeypatch):
    client = mlflow.MlflowClient()
    run_id = client.create_run("0").info.run_id
    client.log_param(run_id, "epochs", "3")
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    rec = RunRecord("cnn_baseline", "baseline")
    rec.log_params({"epochs": 3.0, "model": "resnet18"})  # epochs already logged as typed: left alone
    rec.finish()
    run = mlflow.get_run(run_id)
    assert run.info.status == "RUNNING"  # its owner ends it, not the workload
    assert run.data.params == {"epochs": "3", "model": "resnet18"}


def test_run_record_as_context_fails_its_run_when_the_body_raises(tracking_uri):
    with pytest.raises(RuntimeError):
        with RunRecord("cnn_baseline", "baseline") as rec:
            raise RuntimeError("training broke")
    assert mlflow.get_run(rec.run_id).info.status == "FAILED"
    with RunRecord("cnn_baseline", "baseline") as rec:
        pass
    assert mlflow.get_run(rec.run_id).info.status == "FINISHED"


def test_training_log_stops_early_only_in_training_and_logs_totals(tracking_uri, capsys):
    rec = RunRecord("cnn_baseline", "baseline")
    log = TrainingLog(rec, EarlyStopping(patience=1))
    assert not log.epoch_done(100.0, 102.0, 64, 4e12, {"val_loss": 1.0})
    assert not log.epoch_done(102.0, 104.0, 64, 4e12, {"val_loss": 2.0}, may_stop=False)  # fine-tuning
    assert log.epoch_done(104.0, 106.0, 64, 4e12, {"val_loss": 2.0})
    assert "early stopping after epoch 2: val_loss has not improved for 1 epochs" in capsys.readouterr().err
    log.finish({"final_accuracy": 0.5}, peak_tflops=2.0)
    rec.finish()
    client = mlflow.MlflowClient()
    run = client.get_run(rec.run_id)
    assert run.data.tags["early_stopped"] == "true"
    m = run.data.metrics
    assert (m["stopped_epoch"], m["epochs_run"], m["best_epoch"], m["best_val_loss"]) == (2, 3, 0, 1.0)
    assert m["train_time_s"] == pytest.approx(6.0) and m["achieved_tflops"] == pytest.approx(2.0)
    assert m["mfu_ratio"] == pytest.approx(1.0)
    assert [h.step for h in client.get_metric_history(rec.run_id, "epochs_run")] == [3]
    assert [h.step for h in client.get_metric_history(rec.run_id, "epoch_time_s")] == [0, 1, 2]
