"""What every recipe run records, independent of the framework that trains.

The workload writes to the run it is handed (MLFLOW_RUN_ID from `mlflow run`, else the
run `radt-ext run` records the command into, `radt_ext.workload_api.markers.monitor_run_id()`) through `MlflowClient`, never
through the fluent API: the fluent API ends the active run at interpreter exit, and the
run's status belongs to whoever created it. Without either the workload creates a run and
finishes it itself.

Energy per epoch: the workload cannot read energy (radt_ext never touches NVML), so every
epoch logs `epoch_start_time_s` / `epoch_end_time_s` (seconds since the epoch) and the
inference phase logs `inference_start_time_s` / `inference_end_time_s`; the session's
`system/*` power samples carry their own timestamps, so energy per epoch and per inference
is the power integral between those marks.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Mapping

from radt_ext.workload_api.markers import monitor_run_id

# Dense peak TFLOP/s per precision, from vendor data sheets (SXM parts), used only when a
# measured peak is not available. Keys are matched as substrings of the device name.
PEAK_TFLOPS_TABLE: dict[str, dict[str, float]] = {
    "H200": {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0},
    "H100": {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979.0},
    "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    "L40S": {"fp32": 91.6, "tf32": 183.0, "bf16": 362.0, "fp16": 362.0, "fp8": 733.0},
}


def table_peak_tflops(device_name: str, precision: str) -> float | None:
    for key, peaks in PEAK_TFLOPS_TABLE.items():
        if key.lower() in device_name.lower():
            return peaks.get(precision)
    return None


def say(message: str) -> None:
    """One line for the user on stderr, prefixed so it stands out in `mlflow run` output."""
    print(f"radt-ext: {message}", file=sys.stderr, flush=True)


@dataclass
class EarlyStopping:
    """Stop when validation loss has not improved by `min_delta` for `patience` epochs (0: never)."""

    patience: int = 0
    min_delta: float = 0.0
    best: float = math.inf
    best_epoch: int = -1
    bad_epochs: int = 0

    def update(self, epoch: int, val_loss: float) -> bool:
        """Record one epoch; True when training should stop."""
        if val_loss < self.best - self.min_delta:
            self.best, self.best_epoch, self.bad_epochs = val_loss, epoch, 0
            return False
        self.bad_epochs += 1
        return self.patience > 0 and self.bad_epochs >= self.patience


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_summary(batch_times_s: list[float], batch_size: int, prefix: str = "inference") -> dict[str, float]:
    """p50/p95/p99 latency of one batch in milliseconds and throughput in samples/s."""
    if not batch_times_s:
        raise ValueError("no inference batches were timed")
    total = sum(batch_times_s)
    return {
        f"{prefix}_latency_p50_ms": percentile(batch_times_s, 50) * 1e3,
        f"{prefix}_latency_p95_ms": percentile(batch_times_s, 95) * 1e3,
        f"{prefix}_latency_p99_ms": percentile(batch_times_s, 99) * 1e3,
        f"{prefix}_latency_mean_ms": statistics.fmean(batch_times_s) * 1e3,
        f"{prefix}_batch_size": float(batch_size),
        f"{prefix}_throughput_samples_per_s": batch_size * len(batch_times_s) / total if total > 0 else 0.0,
    }


def utilisation(flops: float, seconds: float, peak_tflops: float | None) -> dict[str, float]:
    """Achieved TFLOP/s and model-FLOPs utilisation (ratio of the peak) where both are known."""
    if flops <= 0 or seconds <= 0:
        return {}
    achieved = flops / seconds / 1e12
    out = {"achieved_tflops": achieved}
    if peak_tflops:
        out["device_peak_tflops"] = peak_tflops
        out["mfu_ratio"] = achieved / peak_tflops
    return out


@dataclass
class RunRecord:
    """The MLflow run one workload writes into: params, tags, per-epoch and end metrics."""

    recipe: str
    variant: str
    baseline_run_id: str | None = None
    run_id: str = ""
    owns_run: bool = False
    _client: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._opened = False

    def open(self) -> "RunRecord":
        """Join or create the run; done at the first record, not before: importing MLflow takes seconds
        that a recipe's first training step need not wait for."""
        if self._opened:
            return self
        self._opened = True
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient()
        # mlflow run's run, else the run radt-ext records this command into
        self.run_id = os.environ.get("MLFLOW_RUN_ID") or monitor_run_id() or ""
        if not self.run_id:
            experiment_id = os.environ.get("MLFLOW_EXPERIMENT_ID") or self._experiment_id()
            run = self._client.create_run(experiment_id, run_name=f"{self.recipe}-{self.variant}")
            self.run_id, self.owns_run = run.info.run_id, True
        tags = {"recipe": self.recipe, "variant": self.variant}
        if self.baseline_run_id:
            tags["baseline_run_id"] = self.baseline_run_id
        self.set_tags(tags)
        return self

    def _experiment_id(self) -> str:
        import mlflow

        name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if not name:
            return "0"
        found = mlflow.get_experiment_by_name(name)
        return found.experiment_id if found else mlflow.create_experiment(name)

    def set_tags(self, tags: Mapping[str, object]) -> None:
        from mlflow.entities import RunTag

        self.open()
        self._client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_params(self, params: Mapping[str, object]) -> None:
        """Log params, leaving alone those already on the run (`mlflow run` logs its -P values
        as typed, and MLflow refuses to change a param)."""
        from mlflow.entities import Param

        self.open()
        existing = self._client.get_run(self.run_id).data.params
        fresh = [Param(k, _param_text(v)) for k, v in params.items() if k not in existing]
        for start in range(0, len(fresh), 100):
            self._client.log_batch(self.run_id, params=fresh[start:start + 100])

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0, when: float | None = None) -> None:
        from mlflow.entities import Metric

        self.open()
        stamp = int((when if when is not None else time.time()) * 1000)
        batch = [Metric(k, float(v), stamp, step) for k, v in metrics.items() if _finite(v)]
        for start in range(0, len(batch), 1000):
            self._client.log_batch(self.run_id, metrics=batch[start:start + 1000])

    def log_epoch(self, epoch: int, start_s: float, end_s: float, samples: int, metrics: Mapping[str, float]) -> None:
        """One epoch's metrics at step=epoch, with its wall-clock bounds for energy attribution."""
        elapsed = max(end_s - start_s, 1e-9)
        row = dict(metrics)
        row.update(
            epoch_time_s=elapsed,
            samples_per_s=samples / elapsed,
            epoch_start_time_s=start_s,
            epoch_end_time_s=end_s,
        )
        self.log_metrics(row, step=epoch, when=end_s)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.open()
        self._client.log_text(self.run_id, text, artifact_file)

    def finish(self, failed: bool = False) -> None:
        """End the run only when this workload created it; otherwise its owner does."""
        self.open()
        if self.owns_run:
            self._client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")

    def __enter__(self) -> "RunRecord":
        return self

    def __exit__(self, exc_type, *_) -> None:
        self.finish(failed=exc_type is not None)


@dataclass
class TrainingLog:
    """Training so far (epochs, seconds, FLOPs, best val loss), logged epoch by epoch and at the end."""

    record: RunRecord
    stopper: EarlyStopping
    epoch: int = 0
    seconds: float = 0.0
    flops: float = 0.0

    def epoch_done(self, start_s: float, end_s: float, samples: int, flops: float, metrics: Mapping[str, float],
                   may_stop: bool = True) -> bool:
        """Log one epoch (metrics include val_loss); True when early stopping ends training."""
        self.seconds += end_s - start_s
        self.flops += flops
        self.record.log_epoch(self.epoch, start_s, end_s, samples, metrics)
        self.epoch += 1
        if not (may_stop and self.stopper.update(self.epoch - 1, metrics["val_loss"])):
            return False
        say(f"early stopping after epoch {self.epoch - 1}: val_loss has not improved for {self.stopper.patience} epochs")
        self.record.set_tags({"early_stopped": "true"})
        self.record.log_metrics({"stopped_epoch": self.epoch - 1})
        return True

    def finish(self, metrics: Mapping[str, float], peak_tflops: float | None) -> None:
        """Log the end metrics with the training totals, at the step after the last epoch."""
        out = dict(metrics)
        out.update(train_time_s=self.seconds, epochs_run=self.epoch)
        if self.stopper.best_epoch >= 0:
            out["best_val_loss"] = self.stopper.best
            out["best_epoch"] = self.stopper.best_epoch
        out.update(utilisation(self.flops, self.seconds, peak_tflops))
        self.record.log_metrics(out, step=self.epoch)


def _param_text(value: object) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def _finite(value: object) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False

