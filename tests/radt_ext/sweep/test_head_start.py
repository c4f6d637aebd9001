"""A sweep's first job starts before MLflow is imported (head_start.py): its runs are whole and timed by its
process, resume still skips what finished, a stop meanwhile ends the job and records it, and the store is
read without MLflow only where that can be told (StoreProbe.finished_with_tag)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.store.store_probe import StoreProbe
from tests.radt_ext.helpers import radt

JOB = Path(__file__).with_name("plain_job.py")


def spec(tmp_path: Path, jobs: dict[str, str], name: str = "s.yaml") -> Path:
    path = tmp_path / name
    lines = "\n".join(f"  {k}: {{command: {json.dumps(cmd)}}}" for k, cmd in jobs.items())
    path.write_text(textwrap.dedent("""
        name: head
        experiment: head-start
        devices: [cpu]
        modes: [exclusive]
        interval: 0.1
        workloads:
    """) + lines + "\n")
    return path


def job(tmp_path: Path, name: str, seconds: float = 0.5, hold: Path | None = None) -> str:
    cmd = f"{sys.executable} {JOB} --out {tmp_path / name}.json --seconds {seconds}"
    return cmd + (f" --hold-if {hold}" if hold else "")


def runs_by_name(uri: str) -> dict[str, list]:
    client = MlflowClient(uri)
    out: dict[str, list] = {}
    for e in client.search_experiments():
        for r in client.search_runs([e.experiment_id]):
            out.setdefault(r.info.run_name, []).append(r)
    return out


def test_first_job_starts_before_mlflow_and_its_runs_are_its_process(tmp_path, tracking_uri):
    path = spec(tmp_path, {"a": job(tmp_path, "a", 0.3), "b": job(tmp_path, "b")})
    timings = tmp_path / "timings.json"
    launched = time.time()
    done = radt("sweep", str(path), env={"RADT_EXT_TIMINGS": str(timings)})
    assert done.returncode == 0, done.stderr
    head = json.loads(timings.read_text())["head"]
    assert head["variant"] == 0 and head["mlflow_loaded"] is False  # started before MLflow was imported
    assert head["workload_started"] < head["run"] < head["parent_created"]  # its runs were made later
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["started"] - launched < 30  # the job ran, once
    runs = runs_by_name(tracking_uri)
    child, = runs["a"]
    parent = next(r for r in runs["head:exclusive a on cpu"])
    assert child.info.status == parent.info.status == "FINISHED"
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.data.tags["collocation.workload"] == "a" and parent.data.tags["sweep.hash"]
    # both runs start before the job's own first line ran and the child ends when its process did
    assert parent.info.start_time / 1000 <= a["started"] and child.info.start_time / 1000 <= a["started"]
    assert a["started"] - child.info.start_time / 1000 < 5
    assert 0 <= child.info.end_time / 1000 - a["ended"] < 1.0
    assert abs(parent.data.metrics["summary/makespan_s"] - (a["ended"] - head["workload_started"])) < 1.0
    assert child.data.metrics["summary/wait_s"] < 0.01
    # its figures end with its process, not when the sweep reached its group (after MLflow's import)
    assert head["run"] > a["ended"], head  # it ended before MLflow's import was done
    lived = a["ended"] - head["workload_started"]
    for r in (child, parent):
        assert r.data.metrics["summary/e2e_duration_s"] < lived + 0.5, (r.info.run_name, lived)
    assert "b" in runs and runs["b"][0].info.status == "FINISHED"  # the next one ran the usual way
    again = radt("sweep", str(path), env={"RADT_EXT_TIMINGS": str(timings)})
    assert again.returncode == 0, again.stderr
    assert json.loads(timings.read_text())["head"] is None  # everything done: nothing started early
    assert again.stderr.count("FINISHED before") == 2 and len(runs_by_name(tracking_uri)["a"]) == 1


def test_the_first_variant_not_done_is_the_one_started_early(tmp_path, tracking_uri):
    first = radt("sweep", str(spec(tmp_path, {"a": job(tmp_path, "a")})))
    assert first.returncode == 0, first.stderr
    timings = tmp_path / "timings.json"
    done = radt("sweep", str(spec(tmp_path, {"a": job(tmp_path, "a"), "b": job(tmp_path, "b")})),
                env={"RADT_EXT_TIMINGS": str(timings)})
    assert done.returncode == 0, done.stderr
    assert json.loads(timings.read_text())["head"]["variant"] == 1
    runs = runs_by_name(tracking_uri)
    assert len(runs["a"]) == 1 and [r.info.status for r in runs["b"]] == ["FINISHED"]


def test_an_exclusive_group_of_two_starts_its_first_early_and_its_second_after_it(tmp_path, tracking_uri):
    path = tmp_path / "pair.yaml"
    path.write_text(textwrap.dedent(f"""
        name: pair
        experiment: head-pair
        devices: [cpu]
        interval: 0.1
        workloads:
          a: {{command: {json.dumps(job(tmp_path, "a"))}}}
          b: {{command: {json.dumps(job(tmp_path, "b"))}}}
        groups:
          - {{workloads: [a, b], modes: [exclusive]}}
    """))
    timings = tmp_path / "timings.json"
    done = radt("sweep", str(path), env={"RADT_EXT_TIMINGS": str(timings)})
    assert done.returncode == 0, done.stderr
    assert json.loads(timings.read_text())["head"]["mlflow_loaded"] is False
    a, b = (json.loads((tmp_path / f"{k}.json").read_text()) for k in "ab")
    assert a["ended"] <= b["started"]  # one after the other
    runs = runs_by_name(tracking_uri)
    parent, = runs["pair:exclusive a+b on cpu"]
    for name in "ab":
        child, = runs[name]
        assert child.info.status == "FINISHED" and child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert runs["b"][0].info.start_time / 1000 >= a["ended"] - 0.5  # the second's run starts at its turn


def test_a_stop_while_mlflow_loads_ends_the_early_job_and_records_it(tmp_path, tracking_uri):
    hold = tmp_path / "hold"
    hold.write_text("")
    path = spec(tmp_path, {"a": job(tmp_path, "a", hold=hold), "b": job(tmp_path, "b")})
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "sweep", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    started = tmp_path / "a.json.started"
    deadline = time.time() + 60
    while not started.exists() and time.time() < deadline:
        time.sleep(0.01)
    assert started.exists(), proc.communicate(timeout=60)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert not (tmp_path / "a.json").exists()  # stopped while it held, not run to its end
    assert not (tmp_path / "b.json.started").exists()  # the sweep stopped at the signal
    runs = runs_by_name(tracking_uri)
    assert [r.info.status for r in runs.get("a", [])] == ["KILLED"], (runs, err)  # in the store, not spooled
    assert [r.info.status for r in runs["head:exclusive a on cpu"]] == ["KILLED"]
    hold.unlink()
    again = radt("sweep", str(path))  # a stopped variant is not done: it runs again, then the rest
    assert again.returncode == 0, again.stderr
    statuses = sorted(r.info.status for r in runs_by_name(tracking_uri)["a"])
    assert "FINISHED" in statuses and (tmp_path / "b.json").exists()


@pytest.mark.new_store
def test_store_probe_tells_a_finished_tagged_run_without_mlflow(tmp_path, tracking_uri):
    probe = StoreProbe(tracking_uri)
    assert probe.fresh and probe.finished_with_tag("e", "sweep.hash", "h1") is False  # no store yet: none done
    client = MlflowClient(tracking_uri)
    exp = client.create_experiment("e")
    other = client.create_experiment("other")
    done = client.create_run(exp, tags={"sweep.hash": "h1"})
    client.set_terminated(done.info.run_id, "FINISHED")
    client.create_run(exp, tags={"sweep.hash": "h2"})  # still RUNNING
    gone = client.create_run(exp, tags={"sweep.hash": "h3"})
    client.set_terminated(gone.info.run_id, "FINISHED")
    client.delete_run(gone.info.run_id)
    elsewhere = client.create_run(other, tags={"sweep.hash": "h4"})
    client.set_terminated(elsewhere.info.run_id, "FINISHED")
    probe = StoreProbe(tracking_uri)
    assert probe.finished_with_tag("e", "sweep.hash", "h1") is True
    assert probe.finished_with_tag("e", "sweep.hash", "h2") is False  # not finished
    assert probe.finished_with_tag("e", "sweep.hash", "h3") is False  # deleted
    assert probe.finished_with_tag("e", "sweep.hash", "h4") is False  # another experiment's
    assert probe.finished_with_tag("missing", "sweep.hash", "h1") is False
    client.delete_experiment(exp)
    assert probe.finished_with_tag("e", "sweep.hash", "h1") is False  # a deleted experiment's runs count not
    (tmp_path / "mlruns").mkdir()
    assert StoreProbe(str(tmp_path / "mlruns")).finished_with_tag("e", "sweep.hash", "h1") is None  # MLflow tells
