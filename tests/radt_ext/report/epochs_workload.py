"""A tiny CPU workload for report tests: a few "epochs" of numpy work, per-epoch metrics
(with their wall-clock bounds, as radt_ext.workloads.records logs them) and progress."""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from radt_ext.workload_api.markers import monitor_run_id
from radt_ext.workload_api.progress import log_progress


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.3, help="work per epoch")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    client, run_id = MlflowClient(), os.environ.get("MLFLOW_RUN_ID") or monitor_run_id()
    a = np.random.default_rng(0).standard_normal((128, 128), dtype=np.float32)
    loss = 1.0
    for epoch in range(args.epochs):
        start = time.time()
        samples = 0
        while time.time() - start < args.seconds:
            a = np.tanh(a @ a.T * 0.01)
            samples += args.batch
            log_progress(samples=args.batch, steps=1)
        end = time.time()
        loss *= 0.6
        client.log_batch(run_id, metrics=[Metric(k, v, int(end * 1000), epoch) for k, v in {
            "loss": loss, "epoch_start_time_s": start, "epoch_end_time_s": end,
            "samples_per_s": samples / (end - start)}.items()])


if __name__ == "__main__":
    main()
