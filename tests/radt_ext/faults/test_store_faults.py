"""The store locks, goes away, or the spool cannot be written: nothing lost, nothing doubled."""
import json
import logging
import sys
import time

import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from tests.radt_ext.faults.scenarios import server_outage, spool_unwritable, sqlite_contention, sqlite_lock_held
from tests.radt_ext.helpers import radt


@pytest.mark.slow
def test_writer_waits_out_a_sqlite_lock_instead_of_spooling(tmp_path):
    out = sqlite_lock_held(tmp_path)
    assert out.details["lock_retries"] > 0  # it did meet the lock, past SQLite's own wait
    assert out.sent == out.stored == out.details["writer_stored"] == 50
    assert out.spooled == 0 and out.lost == 0 and out.duplicates == 0


def _line(uri, run_id, **kw):
    return json.dumps({"tracking_uri": uri, "run_id": run_id, **kw}) + "\n"


def test_sync_is_idempotent_and_applies_tags_and_status_last(tracking_uri, tmp_path):
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    # two points landed before the outage (the second one after the writer had given up on it)
    client.log_batch(run_id, metrics=[Metric("system/a_w", 0.0, 1000, 0), Metric("system/a_w", 1.0, 1001, 1)])
    spool = tmp_path / "spool"
    spool.mkdir()
    lines = [_line(tracking_uri, run_id, key="system/a_w", value=float(i), timestamp=1000 + i, step=i)
             for i in range(1, 10)]
    lines.append(lines[-1])  # spooled twice
    lines.append(_line(tracking_uri, run_id, kind="tag", key="radt_ext.metrics_sent", value="10"))
    lines.append(_line(tracking_uri, run_id, kind="status", status="KILLED", end_time=5000))
    lines.append('{"tracking_uri": "sqlite:///x", "run_id": "abc", "ke')  # cut off by a crash mid-write
    (spool / f"{run_id}.jsonl").write_text("".join(lines))
    copy = (spool / f"{run_id}.jsonl").read_text()

    first = radt("sync")
    assert first.returncode == 0, first.stderr
    assert "8 points stored" in first.stdout and "2 already stored" in first.stdout  # one in the store, one twice
    assert "1 unreadable line(s) skipped" in first.stdout
    assert not list(spool.iterdir())
    (spool / f"{run_id}.jsonl").write_text(copy)  # as if the first sync died before removing the file
    again = radt("sync")
    assert again.returncode == 0 and "0 points stored" in again.stdout, again.stdout + again.stderr
    history = client.get_metric_history(run_id, "system/a_w")
    assert sorted(m.step for m in history) == list(range(10))
    run = client.get_run(run_id)
    assert run.info.status == "KILLED" and run.info.end_time == 5000
    assert run.data.tags["radt_ext.metrics_sent"] == "10"
    assert radt("sync").stdout.startswith("nothing to sync")


def test_sync_against_a_dead_server_keeps_the_file_and_says_so_in_one_line(tracking_uri, tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    path = spool / "r.jsonl"
    path.write_text(_line("http://127.0.0.1:9", "r", key="system/a_w", value=1.0, timestamp=1, step=0))
    res = radt("sync", timeout=60)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.strip()] == [
        ln for ln in res.stderr.splitlines() if "does not answer" in ln and "kept" in ln]
    assert path.read_text().count("\n") == 1 and sorted(p.name for p in spool.iterdir()) == ["r.jsonl", "waiting.json"]


@pytest.mark.slow
def test_four_concurrent_runs_into_one_sqlite_file_lose_nothing(tmp_path):
    out = sqlite_contention(tmp_path)
    assert out.exit_code == 0 and out.status == "FINISHED", out.details["stderr"]
    assert len(out.details["per_run"]) == 4
    for sent, stored, spooled in out.details["per_run"]:
        assert sent > 0 and stored == sent and spooled == 0
    assert out.duplicates == 0


@pytest.mark.slow
def test_server_killed_mid_run_then_synced_nothing_lost_nothing_doubled(tmp_path):
    out = server_outage(tmp_path)
    d = out.details
    assert out.exit_code == 0 and d["marker"], d["stderr"]  # the workload never noticed
    assert d["status_before"] == "RUNNING"  # the end of the run was spooled, not lost...
    assert d["sync"][0] == 0 and d["again"][0] == 0, d
    assert out.status == "FINISHED"  # ...and sync applied it
    tags = d["tags"]
    assert int(tags["radt_ext.metrics_spooled"]) > 0 and "summary/e2e_duration_s" in MlflowClient(
        f"sqlite:///{tmp_path / 'server.db'}").get_run(d["run_id"]).data.metrics
    assert d["before"] < out.sent  # the outage really cost the store points until sync
    assert out.stored == out.sent and out.duplicates == 0
    assert "0 points stored" in d["again"][1]  # the repeated sync found everything there
    assert sum("refused points" in ln for ln in d["stderr"].splitlines()) == 1  # one warning, not one per batch


@pytest.mark.slow
def test_unwritable_spool_is_one_error_and_the_workload_carries_on(tmp_path):
    out = spool_unwritable(tmp_path)
    d = out.details
    assert d["rc"] == 0 and out.exit_code == 0 and d["marker"]
    errors = [ln for ln in d["lines"] if ln.startswith("ERROR")]
    assert len(errors) == 1 and "cannot write spool file" in errors[0] and "RADT_EXT_SPOOL_DIR" in errors[0]
    assert out.lost > 0 and d["writer_stored"] == out.stored
    assert out.stored + out.spooled + out.lost == out.sent  # every point accounted for


@pytest.mark.slow
@pytest.mark.timeout(150, method="thread")  # what this guards against: MLflow's HTTP retries holding the run for minutes
def test_server_dying_once_the_run_ended_does_not_hold_radt_ext(tmp_path):
    from radt_ext.run.session import WorkloadSession, WorkloadSpec
    from tests.radt_ext.faults.scenarios import _Lines
    from tests.servers import start_mlflow_server

    backend = f"sqlite:///{tmp_path / 'server.db'}"
    server = start_mlflow_server(backend, tmp_path / "server")
    handler = _Lines()
    logging.getLogger("radt_ext").addHandler(handler)
    try:
        s = WorkloadSession(WorkloadSpec(command=[sys.executable, "-c", "import time; time.sleep(1)"],
                                         listeners="top:0.05", tracking_uri=server.url,
                                         env={"RADT_EXT_SPOOL_DIR": str(tmp_path / "spool")}))
        s.prepare()
        s.start()
        s.wait()
        end_run = s.recorder.writer.end_run

        def end_run_then_the_server_dies(*args, **kwargs):
            stored = end_run(*args, **kwargs)
            server.stop()  # between the run's end and its report
            return stored

        s.recorder.writer.end_run = end_run_then_the_server_dies
        code = s.finish()
    finally:
        server.stop()
        logging.getLogger("radt_ext").removeHandler(handler)
    assert code == 0
    assert MlflowClient(backend).get_run(s.run_id).info.status == "FINISHED"
    assert [ln for ln in handler.lines if "no report for run" in ln], handler.lines


@pytest.mark.slow
@pytest.mark.timeout(150, method="thread")
def test_server_dying_before_the_workloads_own_runs_are_closed_does_not_hold_radt_ext(tmp_path):
    from radt_ext.run.session import WorkloadSession, WorkloadSpec
    from tests.radt_ext.faults.scenarios import _Lines
    from tests.servers import start_mlflow_server

    backend = f"sqlite:///{tmp_path / 'server.db'}"
    server = start_mlflow_server(backend, tmp_path / "server")
    handler = _Lines()
    logging.getLogger("radt_ext").addHandler(handler)
    script = "import mlflow, time\nwith mlflow.start_run():\n    mlflow.log_metric('loss', 1.0)\n    time.sleep(1.5)\n"
    try:
        s = WorkloadSession(WorkloadSpec(command=[sys.executable, "-c", script], listeners="top:0.05",
                                         tracking_uri=server.url,
                                         env={"RADT_EXT_SPOOL_DIR": str(tmp_path / "spool")}))
        s.prepare()
        s.start()
        s.wait()
        stop = s.recorder.stop

        def listeners_stop_then_the_server_dies(**how):
            stop(**how)
            server.stop()  # before the runs the workload opened are ended and summarised

        s.recorder.stop = listeners_stop_then_the_server_dies
        began = time.monotonic()
        code = s.finish()
        took = time.monotonic() - began
    finally:
        server.stop()
        logging.getLogger("radt_ext").removeHandler(handler)
    assert code == 0 and took < 60, took
    lines = [ln for ln in handler.lines if "the runs the workload opened" in ln]
    assert len(lines) == 1 and "were not closed (the server does not answer)" in lines[0], handler.lines
    assert s.workload_runs.runs and next(iter(s.workload_runs.runs)) in lines[0]  # it had found the run
    spool = s.recorder.writer.spool_path  # radt-ext's own run's end waits there for `radt-ext sync`
    ends = [json.loads(ln) for ln in open(spool)]
    assert {"kind": "status", "status": "FINISHED", "run_id": s.run_id}.items() <= ends[-1].items()
