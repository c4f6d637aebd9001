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
