import json

from mlflow.tracking import MlflowClient

from radt_ext.writer import MAX_BATCH, MetricWriter


def test_writer_stores_every_point_with_its_own_timestamp_and_step(tracking_uri):
    """Through MLflow's log_batch (bulk=False; the direct path is tests/radt_ext/test_bulk_metrics.py)."""
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    calls = []
    real = client.log_batch
    client.log_batch = lambda *a, **k: (calls.append(len(k.get("metrics", ()))), real(*a, **k))[1]
    writer = MetricWriter(client, run_id, tracking_uri, flush_interval=0.05, bulk=False).start()
    n = 2 * MAX_BATCH + 17
    for i in range(n):
        writer.add("system/x_pct", float(i), 1_700_000_000_000 + i, i)
    writer.close()
    history = client.get_metric_history(run_id, "system/x_pct")
    assert len(history) == n == writer.stored == writer.sent
    assert max(calls) <= MAX_BATCH
    by_step = {m.step: m for m in history}
    assert by_step[5].timestamp == 1_700_000_000_005 and by_step[5].value == 5.0


def test_writer_spools_what_the_store_refuses(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    # a tracking server that is not there: nothing listens on this port
    uri = "http://127.0.0.1:9"
    client = MlflowClient(uri)
    spool = tmp_path / "spool" / "r.jsonl"
    writer = MetricWriter(client, "0123456789abcdef", uri, flush_interval=0.05, retries=0, spool_path=spool).start()
    for i in range(5):
        writer.add("system/y_w", float(i), 1000 + i, i)
    writer.close()
    lines = [json.loads(line) for line in spool.read_text().splitlines()]
    assert writer.spooled == 5 and writer.stored == 0
    assert [p["value"] for p in lines] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert lines[0]["tracking_uri"] == uri and lines[0]["run_id"] == "0123456789abcdef"
    assert writer.errors
