"""`radt-ext sweep FILE --plain`: the spec's jobs as plain processes, one lane per device, recorded from
outside into a real SQLite store; NVML replayed from the 2-GPU trace for the devices."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.packing import queue
from radt_ext.sweep.plain_store import newest
from radt_ext.sweep.spec import load
from radt_ext.workload_api.autoprogress import SITE_DIR
from tests.radt_ext.helpers import radt, sweep_spec

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plain_job.py")


def spec(tmp_path, jobs: dict[str, str], devices: str = '["0", "1"]', extra: str = "") -> str:
    lines = "\n".join(f"  {name}: {{command: \"{sys.executable} {JOB} --out {tmp_path / name} {args}\"}}"
                      for name, args in jobs.items())
    return str(sweep_spec(tmp_path / "plain.yaml", "plainq", extra + "workloads:\n" + lines + "\n", devices=devices,
                          modes="[naive]", schedule="pack"))


def seen(tmp_path, name: str) -> dict:
    return json.loads((tmp_path / name).read_text())


def plain_runs(uri: str) -> tuple[list, dict]:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("plainq")
    runs = client.search_runs([exp.experiment_id], "tags.`sweep.pass` = 'plain'")
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return parents, {r.data.tags["sweep.job"]: r for r in runs if "mlflow.parentRunId" in r.data.tags}


def test_each_job_runs_plain_in_lanes_and_is_recorded_with_its_process_times(tmp_path, two_gpus):
    path = spec(tmp_path, {"a": "--seconds 0.8", "b": "--seconds 0.8", "c": "--seconds 0.2",
                           "bad": "--seconds 0.1 --exit 3", "d": "--seconds 0.1"})
    env = {"RADT_EXT_SOMETHING": "1", "PYTHONPATH": os.pathsep.join([SITE_DIR, str(tmp_path)])}
    res = radt("sweep", path, "--plain", env=env, cwd=tmp_path)
    assert res.returncode == 1, res.stderr  # one job failed; the others ran all the same
    assert "plain pass: 5 of 5 jobs on 2 lane(s)" in res.stderr and "not FINISHED: bad" in res.stderr
    jobs = {n: seen(tmp_path, n) for n in ("a", "b", "c", "bad", "d")}
    for j in jobs.values():  # nothing of radt-ext in the jobs: no variables, no progress hook
        assert j["vars"] == [] and SITE_DIR not in j["pythonpath"] and not j["modules"]
        assert j["pythonpath"] == str(tmp_path)
    # a lane per device, in the spec's order: a and b at once, the next job once a lane's last one ended
    assert {jobs["a"]["cuda"], jobs["b"]["cuda"]} == {"0", "1"}
    assert abs(jobs["a"]["started"] - jobs["b"]["started"]) < 0.5
    assert jobs["c"]["started"] >= min(jobs["a"]["ended"], jobs["b"]["ended"])
    assert jobs["d"]["started"] >= jobs["bad"]["ended"] or jobs["d"]["cuda"] != jobs["bad"]["cuda"]

    parents, kids = plain_runs(two_gpus)
    assert len(parents) == 1 and parents[0].info.status == "FAILED"
    parent = parents[0]
    assert parent.data.tags["sweep.id"] == "plainq" and parent.data.tags["sweep.devices"] == "0,1"
    assert set(kids) == {"a", "b", "c", "bad", "d"}
    keys = {v.workloads[0].source: v.workloads[0].key for v in queue.job_variants(load(path))}
    client = MlflowClient(two_gpus)
    for name, run in kids.items():
        j = jobs[name]
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.info.status == ("FAILED" if name == "bad" else "FINISHED")
        # the run spans the process: started before the job's first line, ended after its last
        assert run.info.start_time <= j["started"] * 1000 < j["ended"] * 1000 <= run.info.end_time
        assert abs(run.data.metrics["summary/wall_s"] - (run.info.end_time - run.info.start_time) / 1000) < 0.01
        assert run.data.metrics["summary/wall_s"] < j["ended"] - j["started"] + 1.0
        assert run.data.tags["sweep.device"] == j["cuda"]
        # the job across passes: the key its exclusive and packed runs carry
        assert run.data.tags["sweep.workload_hash"] == keys[name] and run.data.tags["sweep.workload"] == name
        assert run.data.tags["sweep.id"] == "plainq"
        assert "collocation.mode" not in run.data.tags and "sweep.hash" not in run.data.tags
        log = client.download_artifacts(run.info.run_id, f"plain/{name}.log", str(tmp_path))
        assert f"plain job {name} says hello" in open(log).read()
    first = min(r.info.start_time for r in kids.values())
    last = max(r.info.end_time for r in kids.values())
    assert abs(parent.data.metrics["summary/makespan_s"] - (last - first) / 1000) < 0.01
    assert newest(client, "plainq", keys.items()) is None  # a job failed: no baseline


@pytest.mark.new_store
def test_a_spec_with_a_recipe_is_refused_in_one_line_before_anything_runs(tmp_path, tracking_uri):
    path = spec(tmp_path, {"a": "--seconds 0.1"}, devices="[cpu]")
    text = open(path).read() + "  cnn: {recipe: cnn_baseline, params: {epochs: 1}}\n"
    open(path, "w").write(text)
    res = radt("sweep", path, "--plain", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "cnn (recipe cnn_baseline)" in res.stderr and "give it as `command:`" in res.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "a.started").exists()
    assert not (tmp_path / "mlflow.db").exists()


def test_a_stop_reaches_the_running_jobs_and_keeps_what_ended(tmp_path, two_gpus):
    path = spec(tmp_path, {"q": "--seconds 0.1"})
    assert radt("sweep", path, "--plain", cwd=tmp_path).returncode == 0
    client = MlflowClient(two_gpus)
    q = queue.job_variants(load(path))[0].workloads[0]
    before = newest(client, "plainq", [(q.source, q.key)])
    assert before is not None and before.jobs == 1
    hold = tmp_path / "hold"
    hold.touch()
    path = spec(tmp_path, {"q": "--seconds 0.1", "h1": f"--hold-if {hold}", "h2": f"--hold-if {hold}",
                           "never": "--seconds 0.1"})
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "sweep", path, "--plain"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ((tmp_path / "h1.started").exists() and (tmp_path / "h2.started").exists()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not (tmp_path / "never.started").exists()  # no lane starts another job
    parents, _ = plain_runs(two_gpus)
    stopped = next(p for p in parents if p.info.run_id != before.run_id)
    assert stopped.info.status == "KILLED"
    mine = {r.data.tags["sweep.job"]: r for r in MlflowClient(two_gpus).search_runs(
        [stopped.info.experiment_id], f"tags.`mlflow.parentRunId` = '{stopped.info.run_id}'")}
    assert set(mine) == {"q", "h1", "h2"} and mine["q"].info.status == "FINISHED"
    assert mine["h1"].info.status == mine["h2"].info.status == "KILLED"
    assert mine["h1"].data.tags["sweep.exit_code"] == str(128 + signal.SIGTERM)
    # the pass recorded before is still the baseline
    assert newest(client, "plainq", [(q.source, q.key)]).run_id == before.run_id


@pytest.mark.new_store
def test_dry_run_lists_the_jobs_and_records_nothing(tmp_path, two_gpus):
    path = spec(tmp_path, {"a": "--seconds 0.1", "b": "--seconds 0.1"}, extra="repeats: 2\n")
    res = radt("sweep", path, "--plain", "--dry-run", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "2 jobs on 2 lane(s) (0, 1) (dry run: nothing ran)" in res.stderr  # each job once, whatever the repeats
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "a.started").exists()
