"""`radt-ext sync` against a real SQLite store."""
import json

from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import radt


def _line(uri, run_id, **kw):
    return json.dumps({"tracking_uri": uri, "run_id": run_id, **kw}) + "\n"


def test_sync_cut_off_then_new_spool_lines_keeps_both(tracking_uri, tmp_path):
    """A sync killed mid-way leaves r.jsonl.replaying; the run then spools to a fresh r.jsonl.
    The next sync must store the lines of both files, not replace one with the other."""
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    spool = tmp_path / "spool"
    spool.mkdir()
    point = lambda i: _line(tracking_uri, run_id, key="system/a_w", value=float(i), timestamp=1000 + i, step=i)  # noqa: E731
    (spool / f"{run_id}.jsonl.replaying").write_text("".join(point(i) for i in range(5)))
    (spool / f"{run_id}.jsonl").write_text("".join(point(i) for i in range(5, 10)))

    res = radt("sync")
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(m.step for m in client.get_metric_history(run_id, "system/a_w")) == list(range(10))
    assert not list(spool.iterdir())


def test_a_store_that_still_refuses_does_not_hold_back_the_other_files(tracking_uri, tmp_path):
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    spool = tmp_path / "spool"
    spool.mkdir()
    dead = spool / "0-dead.jsonl"  # sorted first
    dead.write_text(_line("http://127.0.0.1:9", "r", key="system/a_w", value=1.0, timestamp=1, step=0))
    (spool / f"{run_id}.jsonl").write_text(
        "".join(_line(tracking_uri, run_id, key="system/a_w", value=float(i), timestamp=1000 + i, step=i)
                for i in range(3)))

    res = radt("sync", timeout=60)
    assert res.returncode == 1 and "0-dead.jsonl" in res.stderr and "Traceback" not in res.stderr
    assert sorted(m.step for m in client.get_metric_history(run_id, "system/a_w")) == [0, 1, 2]
    assert sorted(p.name for p in spool.iterdir()) == [dead.name, "waiting.json"]  # and why it waits
    assert dead.read_text().count("\n") == 1
