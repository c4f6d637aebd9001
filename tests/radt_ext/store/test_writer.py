import json
import time

from mlflow.tracking import MlflowClient

from radt_ext.store.writer import MAX_BATCH, MetricWriter


def test_writer_stores_every_point_with_its_own_timestamp_and_step(tracking_uri):
    """Through MLflow's log_batch (bulk=False; the direct path is tests/radt_ext/store/test_bulk_metrics.py)."""
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


def test_a_server_that_answers_garbage_spools_the_points_and_the_end(tmp_path, monkeypatch):
    """Something that is not an HTTP server now holds the store's port: /health gets no status line.
    The probe says "down"; it must not raise out of the writer's thread or out of end_run."""
    import socket
    import threading

    from mlflow.entities import Metric

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)

    def answer():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"garbage\r\n")

    threading.Thread(target=answer, daemon=True).start()
    uri = f"http://127.0.0.1:{server.getsockname()[1]}"
    spool = tmp_path / "spool" / "r.jsonl"
    writer = MetricWriter(MlflowClient(uri), "0123456789abcdef", uri, flush_interval=0.05, retries=0,
                          spool_path=spool).start()
    try:
        for i in range(3):
            writer.add("system/y_w", float(i), 1000 + i, i)
        while not writer.down:  # a first batch refused: the writer is in outage mode
            time.sleep(0.01)
        for i in range(3, 6):
            writer.add("system/y_w", float(i), 1000 + i, i)
        writer.close()
        assert writer.end_run([Metric("summary/x", 1.0, 2000, 0)], {"t": "v"}, "FINISHED") is False
    finally:
        server.close()
    records = [json.loads(line) for line in spool.read_text().splitlines()]
    assert writer.sent == writer.spooled == 6
    assert sorted(r["step"] for r in records if "step" in r and r["key"] == "system/y_w") == list(range(6))
    assert [r["status"] for r in records if r.get("kind") == "status"] == ["FINISHED"]


def test_batches_keep_to_mlflows_limits_with_the_tags_first():
    from radt_ext.store.writer import MAX_BATCH, MAX_TAGS, batches

    out = list(batches(list(range(2500)), [f"t{i}" for i in range(150)]))
    assert [(len(m), len(t)) for m, t in out] == [(MAX_BATCH - MAX_TAGS, MAX_TAGS), (MAX_BATCH - 50, 50), (650, 0)]
    assert [x for m, _ in out for x in m] == list(range(2500))
    assert list(batches([], ["a"])) == [([], ["a"])] and list(batches([], [])) == []
