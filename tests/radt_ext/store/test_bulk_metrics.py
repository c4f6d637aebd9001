"""The direct insert path stores exactly what MLflow's own log_batch stores, on SQLite and PostgreSQL.

Each test logs the same points into two runs of one real store, one through `MlflowClient.log_batch` and
one through `BulkMetricInserter`, and compares what MLflow reads back: every history and the latest value
of every key.
"""
from __future__ import annotations

import math
import random
import time

import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from radt_ext.store.bulk_metrics import BulkMetricInserter
from radt_ext.store.writer import MAX_BATCH, MetricWriter, Point
from tests.servers import postgres  # noqa: F401


def _points(seed: int, n: int) -> list[Point]:
    """Points with the awkward cases: NaN, ±inf, exact repeats, one step logged twice with other
    values, steps out of order, keys first seen late."""
    rng = random.Random(seed)
    keys = [f"system/gpu{i}_power_w" for i in range(5)] + ["system/gpu0_energy_j", "system/cpu_pct"]
    out = []
    for i in range(n):
        key = rng.choice(keys[: 2 + i * len(keys) // n])
        value = rng.choice([rng.uniform(-5, 700), float("nan"), float("inf"), -float("inf"), 0.0]
                           if i % 17 == 0 else [rng.uniform(-5, 700)])
        step = rng.randrange(0, n // 3)  # collisions on step with different timestamps/values
        out.append(Point(key, value, 1_800_000_000_000 + rng.randrange(0, n), step))
        if i % 11 == 0:
            out.append(Point(out[-1].key, out[-1].value, out[-1].timestamp, out[-1].step))  # exact repeat
    return out


def _stored(client: MlflowClient, run_id: str) -> tuple[dict, dict]:
    def norm(v):
        return "nan" if math.isnan(v) else v

    run = client.get_run(run_id)
    histories = {
        key: sorted((m.step, m.timestamp, norm(m.value)) for m in client.get_metric_history(run_id, key))
        for key in run.data.metrics
    }
    latest = {k: norm(v) for k, v in run.data.metrics.items()}
    return histories, latest


def _same_as_log_batch(uri: str, batches: list[list[Point]]) -> None:
    client = MlflowClient(uri)
    exp = client.create_experiment(f"bulk-{random.random()}")
    reference = client.create_run(exp).info.run_id
    bulk_run = client.create_run(exp).info.run_id
    inserter = BulkMetricInserter.for_client(client, bulk_run)
    assert inserter is not None
    for batch in batches:
        client.log_batch(reference, metrics=[p.metric() for p in batch], synchronous=True)
        inserter.insert(batch)
    expected, got = _stored(client, reference), _stored(client, bulk_run)
    assert sum(len(h) for h in expected[0].values()) > 100
    assert got == expected


def test_sqlite_bulk_insert_reads_back_like_log_batch(tracking_uri):
    points = _points(1, 3000)
    _same_as_log_batch(tracking_uri, [points[i:i + MAX_BATCH] for i in range(0, len(points), MAX_BATCH)])


def test_postgres_bulk_insert_reads_back_like_log_batch(postgres):  # noqa: F811
    uri = postgres.create_database("bulk_metrics")
    points = _points(2, 2500)
    _same_as_log_batch(uri, [points[i:i + 700] for i in range(0, len(points), 700)])


def test_a_batch_logged_twice_is_stored_once(tracking_uri):
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    inserter = BulkMetricInserter.for_client(client, run_id)
    batch = [Point("system/x_w", float(i), 1000 + i, i) for i in range(50)]
    inserter.insert(batch)
    inserter.insert(batch)  # a spooled batch that landed after all, sent again
    assert len(client.get_metric_history(run_id, "system/x_w")) == 50
    assert client.get_run(run_id).data.metrics["system/x_w"] == 49.0


def test_refuses_a_deleted_run_and_a_bad_name_like_log_batch(tracking_uri):
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    inserter = BulkMetricInserter.for_client(client, run_id)
    with pytest.raises(MlflowException, match="Invalid value"):
        inserter.insert([Point("system/../x", 1.0, 1, 1)])
    client.delete_run(run_id)
    with pytest.raises(MlflowException, match="must be in the 'active' state"):
        inserter.insert([Point("system/x_w", 1.0, 1, 1)])
    assert client.get_metric_history(run_id, "system/x_w") == []


def test_no_bulk_path_for_a_server_uri():
    assert BulkMetricInserter.for_client(MlflowClient("http://127.0.0.1:9"), "0" * 32) is None


def test_writer_uses_the_bulk_path_and_falls_back_to_log_batch(tracking_uri, caplog):
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    calls = []
    real = client.log_batch
    client.log_batch = lambda *a, **k: (calls.append(len(k.get("metrics", ()))), real(*a, **k))[1]
    writer = MetricWriter(client, run_id, tracking_uri, flush_interval=0.05).start()
    for i in range(1500):
        writer.add("system/x_pct", float(i), 1_700_000_000_000 + i, i)
    deadline = time.monotonic() + 30
    while writer.stored < 1500 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writer.stored == 1500 and calls == []  # all through the direct insert

    def broken(batch):  # a store the direct path cannot write (e.g. a schema it does not know)
        raise RuntimeError("no such column: metrics.is_nan")

    writer._bulk.insert = broken
    for i in range(1500, 1600):
        writer.add("system/x_pct", float(i), 1_700_000_000_000 + i, i)
    writer.close()
    assert writer.stored == 1600 and calls == [100]
    assert "using MLflow's log_batch from now on" in caplog.text
    assert len(client.get_metric_history(run_id, "system/x_pct")) == 1600
