"""The runs a workload starts itself get the points of their own span: real scripts of each kind
(sequential, nested, autolog, PyTorch Lightning, Hugging Face Trainer) under the real CLI, a real SQLite store."""
from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.workload_api.markers import TAG_MONITOR_RUN
from tests.radt_ext.helpers import full_rate, radt

BUSY = textwrap.dedent("""
    import time
    def busy(seconds):
        t = time.time()
        while time.time() - t < seconds:
            sum(i * i for i in range(2000))
""")


def _script(tmp_path, body: str) -> str:
    path = tmp_path / "train.py"
    path.write_text(BUSY + textwrap.dedent(body))
    return str(path)


def _runs(uri):
    """{run name: run} over every experiment, and radt-ext's own run."""
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    mine = [r for r in runs if TAG_MONITOR_RUN not in r.data.tags]
    assert len(mine) == 1, [r.info.run_name for r in mine]
    return {r.info.run_name: r for r in runs if TAG_MONITOR_RUN in r.data.tags}, mine[0]


def _times(uri, run, key="system/proc_cpu_pct") -> list[int]:
    return sorted(m.timestamp for m in full_rate(uri, run.info.run_id, key))


def _assert_points_also_in(uri, inner, outer, within=None, key="system/proc_cpu_pct"):
    """Each of inner's points (those within [start, end) ms) is outer's too: in its full-rate timeline, or
    held back there as a repeat of the value outer kept last before it (only the points that say something
    new are kept)."""
    stored = sorted((m.timestamp, m.value) for m in full_rate(uri, outer.info.run_id, key))
    assert stored
    for m in full_rate(uri, inner.info.run_id, key):
        if within and not within[0] <= m.timestamp < within[1]:  # a point in the end's millisecond may be past it
            continue
        before = [v for t, v in stored if t <= m.timestamp]
        assert before and (before[-1] == m.value), f"{key} at {m.timestamp} = {m.value} is not {outer.info.run_name}'s"


def _assert_span_holds_its_points(uri, run, monitor):
    """Every point of the run lies in its span, is one of radt-ext's own run's points, and has summaries."""
    times = _times(uri, run)
    assert times, f"{run.info.run_name} got no system points"
    assert run.info.start_time <= times[0] and times[-1] <= run.info.end_time
    # all of them, not a sample: the same series in the span, each side's repeats held back on its own
    _assert_points_also_in(uri, run, monitor)
    _assert_points_also_in(uri, monitor, run, within=(run.info.start_time, run.info.end_time))
    m = run.data.metrics
    assert m["summary/e2e_duration_s"] == pytest.approx((run.info.end_time - run.info.start_time) / 1000, abs=0.01)
    assert "summary/proc_avg_cpu_pct" in m and "summary/proc_peak_rss_mib" in m
    assert run.data.tags[TAG_MONITOR_RUN] == monitor.info.run_id
    assert run.data.tags["radt_ext.listeners"] == "top:0.05"
    assert "machine.cpu_model" in run.data.tags
    assert int(run.data.tags["radt_ext.metrics_stored"]) == int(run.data.tags["radt_ext.metrics_sent"]) > 0


def test_own_experiment_sequential_and_nested_runs(tracking_uri, tmp_path):
    script = _script(tmp_path, """
        import mlflow
        mlflow.set_experiment("my-project")
        for lr in (0.1, 0.01):                     # a hyperparameter loop
            with mlflow.start_run(run_name=f"lr{lr}"):
                mlflow.log_param("lr", lr)
                busy(0.6)
            busy(0.3)
        with mlflow.start_run(run_name="outer"):
            busy(0.3)
            with mlflow.start_run(run_name="inner", nested=True):
                busy(0.6)
            busy(0.3)
    """)
    res = radt("run", "-l", "top", "-i", "0.05", "--experiment-name", "radt", "--", sys.executable, script)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    runs, monitor = _runs(tracking_uri)
    assert sorted(runs) == ["inner", "lr0.01", "lr0.1", "outer"]
    client = MlflowClient(tracking_uri)
    project = client.get_experiment_by_name("my-project").experiment_id
    assert {r.info.experiment_id for r in runs.values()} == {project}  # the script's experiment, not radt-ext's
    assert monitor.info.experiment_id == client.get_experiment_by_name("radt").experiment_id
    assert monitor.info.status == "FINISHED"
    assert monitor.data.tags["radt_ext.workload_runs"] == "4"
    assert runs["lr0.1"].data.params == {"lr": "0.1"}
    for run in runs.values():
        assert run.info.status == "FINISHED"
        _assert_span_holds_its_points(tracking_uri, run, monitor)
    # sequential runs share no point; a nested run's points are also its parent's (both spans hold them)
    assert not set(_times(tracking_uri, runs["lr0.1"])) & set(_times(tracking_uri, runs["lr0.01"]))
    _assert_points_also_in(tracking_uri, runs["inner"], runs["outer"])
    assert runs["inner"].data.tags["mlflow.parentRunId"] == runs["outer"].info.run_id
    # each run's step counts milliseconds from its own start
    first = full_rate(tracking_uri, runs["lr0.01"].info.run_id, "system/proc_cpu_pct")
    first = min(first, key=lambda m: m.timestamp)
    assert first.step == pytest.approx(first.timestamp - runs["lr0.01"].info.start_time, abs=1)


def test_autolog_track_and_a_run_the_workload_leaves_running(tracking_uri, tmp_path):
    pytest.importorskip("sklearn", reason="scikit-learn is not installed: autolog has nothing to log")
    script = _script(tmp_path, """
        import os, mlflow, numpy as np
        from sklearn.linear_model import LinearRegression
        mlflow.set_experiment("auto")
        mlflow.autolog(log_models=False)
        x = np.random.default_rng(0).standard_normal((200, 3))
        LinearRegression().fit(x, x @ [1.0, 2.0, 3.0])   # autolog starts a run of its own
        busy(0.5)
        mlflow.end_run()
        import radt_ext
        with radt_ext.track(run_name="tracked"):         # under radt-ext run: no second monitor, a run of its own
            busy(0.5)
        mlflow.set_experiment("crash")
        mlflow.start_run(run_name="left-running")
        busy(0.5)
        os._exit(3)                                     # no end_run, no atexit
    """)
    res = radt("run", "-l", "top", "-i", "0.05", "--", sys.executable, script)
    assert res.returncode == 3, res.stderr[-3000:]
    runs, monitor = _runs(tracking_uri)
    assert len(runs) == 3 and monitor.info.status == "FAILED"
    client = MlflowClient(tracking_uri)
    auto_id = client.get_experiment_by_name("auto").experiment_id
    auto = [r for name, r in runs.items() if r.info.experiment_id == auto_id and name != "tracked"]
    assert len(auto) == 1 and auto[0].info.status == "FINISHED"
    assert "training_score" in auto[0].data.metrics  # autolog's own metrics are there too
    _assert_span_holds_its_points(tracking_uri, auto[0], monitor)
    tracked = runs["tracked"]
    assert tracked.info.status == "FINISHED" and tracked.info.experiment_id == auto[0].info.experiment_id
    assert "radt_ext.listeners" in tracked.data.tags
    _assert_span_holds_its_points(tracking_uri, tracked, monitor)
    left = runs["left-running"]
    assert left.info.status == "FAILED"  # the workload died with it RUNNING: it gets the command's status
    _assert_span_holds_its_points(tracking_uri, left, monitor)


def _assert_the_one_workload_run(uri, res, name: str, experiment: str, metric: str) -> None:
    """`radt-ext run` of a framework's script succeeded; the script's one run is `name`, FINISHED in `experiment`
    with its own `metric`, and holds radt-ext's points of its span."""
    assert res.returncode == 0, res.stderr[-3000:]
    runs, monitor = _runs(uri)
    assert list(runs) == [name]
    run = runs[name]
    assert run.info.status == "FINISHED" and metric in run.data.metrics
    assert run.info.experiment_id == MlflowClient(uri).get_experiment_by_name(experiment).experiment_id
    _assert_span_holds_its_points(uri, run, monitor)


def _lightning():
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except ModuleNotFoundError:
            continue
    return None


@pytest.mark.skipif(_lightning() is None, reason="neither lightning nor pytorch-lightning is installed")
def test_pytorch_lightning_mlflow_logger(tracking_uri, tmp_path):
    script = _script(tmp_path, f"""
        import os, torch
        import {_lightning()} as pl
        from {_lightning()}.loggers import MLFlowLogger

        class Tiny(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.layer = torch.nn.Linear(4, 1)
            def training_step(self, batch, _):
                x, y = batch
                loss = torch.nn.functional.mse_loss(self.layer(x), y)
                self.log("train_loss", loss)
                busy(0.05)
                return loss
            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)

        data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
        logger = MLFlowLogger(experiment_name="lightning", run_name="tiny",
                              tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
        trainer = pl.Trainer(max_epochs=2, logger=logger, accelerator="cpu", enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1)
        trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))
    """)
    res = radt("run", "-l", "top", "-i", "0.05", "--", sys.executable, script, timeout=300)
    _assert_the_one_workload_run(tracking_uri, res, "tiny", "lightning", "train_loss")


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None or importlib.util.find_spec("accelerate") is None,
                    reason="transformers' Trainer needs transformers and accelerate, not both installed")
def test_hugging_face_trainer_mlflow_callback(tracking_uri, tmp_path):
    script = _script(tmp_path, """
        import os, torch
        from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

        class Data(torch.utils.data.Dataset):
            def __len__(self):
                return 32
            def __getitem__(self, i):
                return {"input_ids": torch.randint(0, 100, (8,)), "labels": torch.tensor(i % 2)}

        config = BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=16)
        args = TrainingArguments(output_dir=os.path.join(os.getcwd(), "out"), max_steps=4,
                                 per_device_train_batch_size=8, logging_steps=1, report_to=["mlflow"], run_name="hf-tiny", use_cpu=True,
                                 save_strategy="no", disable_tqdm=True)
        Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Data()).train()
    """)
    res = radt("run", "-l", "top", "-i", "0.05", "--", sys.executable, script, timeout=300, cwd=str(tmp_path),
               env={"MLFLOW_EXPERIMENT_NAME": "hf", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    _assert_the_one_workload_run(tracking_uri, res, "hf-tiny", "hf", "loss")
