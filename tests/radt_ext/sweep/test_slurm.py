"""The Slurm executor against a REAL single-node Slurm (munged, slurmctld, slurmd started by the
fixture) and a real `mlflow server`: CPU variants run as Slurm jobs on the node, resume submits only
what is neither FINISHED nor queued/running, --status, --cancel, and SIGINT cancelling a foreground
sweep's jobs. Where Slurm or submitit is not installed these tests skip and say why."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.collocation.support import WORKLOAD
from tests.radt_ext.helpers import radt
from tests.servers import ServerUnavailable, start_mlflow_server
from tests.slurm_cluster import PARTITION, slurm_cluster  # noqa: F401  (fixture)

try:
    import submitit  # noqa: F401

    NO_SUBMITIT = None
except ImportError:
    NO_SUBMITIT = "submitit is not installed (pip install 'radt-ext[slurm]')"

needs_submitit = pytest.mark.skipif(NO_SUBMITIT is not None, reason=NO_SUBMITIT or "")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm-mlflow")
    try:
        srv = start_mlflow_server(f"sqlite:///{root / 'mlflow.db'}", root / "server")
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    yield srv
    srv.stop()


def write_spec(tmp_path, name: str, workload: str, grid, colloc: bool = True):
    path = tmp_path / f"{name}.yaml"
    groups = "\n".join(["  - {workloads: [toy], modes: [exclusive]}"] +
                       (["  - {workloads: [toy, toy], modes: [naive]}"] if colloc else []))
    path.write_text(textwrap.dedent(f"""
        name: {name}
        devices: [cpu]
        interval: 0.2
        child_listeners: top
        workloads:
          toy: {{command: "{workload}", params: {{bs: 8}}}}
        grid: {{bs: {grid}}}
        slurm: {{partition: {PARTITION}, time_limit: 15, cpus_per_job: 1, folder: jobs}}
    """) + "groups:\n" + groups + "\n")
    return path


def parents(uri: str, experiment: str):
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id])
    return [r for r in runs if "mlflow.parentRunId" not in r.data.tags and r.data.tags.get("sweep.role") != "report"]


def jobs(tmp_path) -> dict:
    path = tmp_path / "jobs" / "jobs.json"
    return json.loads(path.read_text()) if path.exists() else {}


def sweep_cli(*args, server, timeout=600):
    return radt("sweep", *args, env={"MLFLOW_TRACKING_URI": server.url, "COLUMNS": "200"}, timeout=timeout)


@pytest.mark.new_store
def test_a_local_store_is_refused_in_one_line(tmp_path, tracking_uri):
    path = write_spec(tmp_path, "local", f"{sys.executable} {WORKLOAD} --seconds 0.2 --batch-size {{bs}}", [8])
    done = radt("sweep", str(path), "--executor", "slurm")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: --executor slurm:") and "docs/team-server.md" in line and tracking_uri in line
    assert not os.path.exists(tracking_uri[len("sqlite:///"):]) and jobs(tmp_path) == {}


@pytest.mark.parametrize("block, words", [
    ("{partition: ci, nodes: 2}", "slurm.nodes: unknown field"),
    ("{time_limit: soon}", "slurm.time_limit: 'soon' is no time limit"),
    ("{gpus_per_job: -1}", "slurm.gpus_per_job: expected a whole number"),
])
def test_a_bad_slurm_block_is_one_line(tmp_path, tracking_uri, block, words):
    path = tmp_path / "bad.yaml"
    path.write_text(f"devices: [cpu]\nworkloads:\n  t: {{command: \"{sys.executable} -c pass\"}}\nslurm: {block}\n")
    done = radt("sweep", str(path), "--executor", "slurm")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert words in done.stderr.strip().splitlines()[-1]


def test_slurm_options_need_the_slurm_executor(tmp_path, tracking_uri):
    path = write_spec(tmp_path, "opts", f"{sys.executable} {WORKLOAD} --seconds 0.2 --batch-size {{bs}}", [8])
    done = radt("sweep", str(path), "--partition", "gpu")
    assert done.returncode == 2 and "--partition is an option of --executor slurm" in done.stderr


@needs_submitit
def test_a_cpu_sweep_runs_as_slurm_jobs_and_resumes(tmp_path, slurm_cluster, server):  # noqa: F811
    path = write_spec(tmp_path, "cpujobs", f"{sys.executable} {WORKLOAD} --seconds 0.5 --batch-size {{bs}}", [8, 16])
    done = sweep_cli(str(path), "--executor", "slurm", server=server)
    assert done.returncode == 0, (done.stderr[-3000:], slurm_cluster.log_tail())
    assert done.stderr.count("submitted as Slurm job") == 4
    book = jobs(tmp_path)
    runs = parents(server.url, "cpujobs")
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 4
    for r in runs:  # each variant ran in the job jobs.json names for it, on the cluster's node
        entry = book[f"cpujobs/{r.data.tags['sweep.hash']}"]
        assert r.data.tags["slurm.job_id"] == entry["job"] and r.data.tags["slurm.node"] == slurm_cluster.node
        assert r.data.tags["slurm.partition"] == PARTITION
    naive = [r for r in runs if r.data.tags["collocation.mode"] == "naive"]
    # the collocated array waited for the exclusive one: every naive variant found its baselines
    assert all(r.data.metrics["summary/avg_slowdown_ratio"] > 0 for r in naive)
    client = MlflowClient(server.url)
    kids = client.search_runs([runs[0].info.experiment_id], "tags.`mlflow.parentRunId` != ''")
    assert len(kids) == 6 and all(k.info.status == "FINISHED" for k in kids)

    status = sweep_cli(str(path), "--status", server=server)
    assert status.returncode == 0 and status.stdout.strip().splitlines()[-1] == "4 FINISHED", status.stderr

    again = sweep_cli(str(path), "--executor", "slurm", server=server)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "submitted" not in again.stderr and again.stderr.count("FINISHED before") == 4
    assert jobs(tmp_path) == book

    victim = naive[0]
    client.set_terminated(victim.info.run_id, "KILLED")
    third = sweep_cli(str(path), "--executor", "slurm", server=server)
    assert third.returncode == 0, third.stderr[-2000:]
    assert third.stderr.count("submitted as Slurm job") == 1 and third.stderr.count("FINISHED before") == 3
    changed = {k for k in book if jobs(tmp_path)[k] != book[k]}
    assert changed == {f"cpujobs/{victim.data.tags['sweep.hash']}"}
    assert len(parents(server.url, "cpujobs")) == 5


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(what)


@needs_submitit
def test_status_resubmit_and_cancel_of_queued_jobs(tmp_path, slurm_cluster, server):  # noqa: F811
    hold = f"{sys.executable} -c 'import time; time.sleep(600)' {{bs}}"
    path = write_spec(tmp_path, "held", hold, [1, 2, 3], colloc=False)
    done = sweep_cli(str(path), "--executor", "slurm", "--no-wait", server=server)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3 variants queued as Slurm jobs" in done.stdout
    ids = {e["job"] for e in jobs(tmp_path).values()}
    assert len(ids) == 3 and ids <= {line.split()[0] for line in slurm_cluster.queue()}
    status = sweep_cli(str(path), "--status", server=server)
    states = status.stdout.strip().splitlines()[-1]
    assert "queued" in states or "running" in states, status.stdout
    # the node has fewer CPUs than jobs (one each): one job waits in the queue while the others run
    again = sweep_cli(str(path), "--executor", "slurm", "--no-wait", server=server)
    assert again.returncode == 0 and again.stderr.count("not submitted again") == 3, again.stderr[-2000:]
    assert {e["job"] for e in jobs(tmp_path).values()} == ids
    _wait_for(lambda: [r.info.status for r in parents(server.url, "held")] == ["RUNNING"] * 2, 180,
              "two variants did not start on the node")  # its 2 CPUs: the third job waits in the queue
    cancel = sweep_cli(str(path), "--cancel", server=server)
    assert cancel.returncode == 0 and cancel.stdout.startswith("cancelled Slurm jobs"), cancel.stderr
    assert not ids & {line.split()[0] for line in slurm_cluster.queue()}  # gone before --cancel returned
    started = parents(server.url, "held")
    assert started and all(r.info.status == "KILLED" for r in started), [r.info.status for r in started]
    status = sweep_cli(str(path), "--status", server=server)
    words = status.stdout.strip().splitlines()[-1]
    assert "FINISHED" not in words and "queued" not in words and "running" not in words, status.stdout


@needs_submitit
def test_sigint_on_a_foreground_sweep_cancels_its_jobs(tmp_path, slurm_cluster, server):  # noqa: F811
    hold = f"{sys.executable} -c 'import time; time.sleep(600)' {{bs}}"
    path = write_spec(tmp_path, "fg", hold, [1, 2], colloc=False)
    env = {**os.environ, "MLFLOW_TRACKING_URI": server.url}
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "sweep", str(path), "--executor", "slurm"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: len(jobs(tmp_path)) == 2 or proc.poll() is not None, 120, "no jobs submitted")
        ids = {e["job"] for e in jobs(tmp_path).values()}
        _wait_for(lambda: [r.info.status for r in parents(server.url, "fg")] == ["RUNNING"] * 2, 180,
                  "the variants did not start on the node")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "cancelling Slurm jobs" in err
    assert not ids & {line.split()[0] for line in slurm_cluster.queue()}  # gone before the sweep returned
    started = parents(server.url, "fg")
    assert started and all(r.info.status == "KILLED" for r in started), [r.info.status for r in started]


@needs_submitit
def test_sbatch_refusing_the_jobs_is_one_line(tmp_path, slurm_cluster, server):  # noqa: F811
    path = write_spec(tmp_path, "refused", f"{sys.executable} {WORKLOAD} --seconds 0.2 --batch-size {{bs}}", [8])
    done = sweep_cli(str(path), "--executor", "slurm", "--partition", "no-such-partition", server=server)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("Error: --executor slurm: sbatch refused the jobs:") and "partition" in line.lower()
    assert jobs(tmp_path) == {} and parents(server.url, "refused") == []


def _job_state(job: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True, timeout=30).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")), "")


@needs_submitit
def test_the_time_limit_warning_stops_the_group_and_fails_the_job(tmp_path, slurm_cluster, server):  # noqa: F811
    hold = f"{sys.executable} -c 'import time; time.sleep(600)' {{bs}}"
    path = write_spec(tmp_path, "limit", hold, [1], colloc=False)
    # 3 min: the warning comes after 90 s, time for a loaded machine to start the group's run first
    done = sweep_cli(str(path), "--executor", "slurm", "--time-limit", "3", server=server)
    assert done.returncode != 0, done.stderr[-2000:]
    (entry,) = jobs(tmp_path).values()
    (run,) = parents(server.url, "limit")
    assert run.info.status == "KILLED"
    log = open(entry["log"]).read()
    # SIGUSR2 (12), which Slurm sends 90 s before the limit, stopped the group: 128 + 12
    assert "KILLED (run" in log and "exit code 140" in log, log[-2000:]
    assert _job_state(entry["job"]) == "FAILED"
    status = sweep_cli(str(path), "--status", server=server)
    assert status.stdout.strip().splitlines()[-1] == "1 KILLED", status.stdout


@pytest.mark.parametrize("text, minutes", [(90, 90), ("90", 90), ("1:30", 90), ("1:30:01", 91), ("1-00:00", 1440)])
def test_time_limits_are_minutes_rounded_up(text, minutes):
    from radt_ext.sweep.slurm_options import minutes as to_minutes

    assert to_minutes(text, "--time-limit") == minutes


def test_the_command_line_wins_over_the_spec_block():
    from radt_ext.sweep.slurm_options import parse, sbatch_option

    spec = parse({"partition": "gpu", "time_limit": "2:00:00", "sbatch": {"qos": "low", "exclusive": True}}, "s.yaml")
    options = spec.merged(partition="debug", time_limit=None, sbatch=dict([sbatch_option("--qos=high", "--sbatch")]))
    assert (options.partition, options.time_limit) == ("debug", 120)
    assert options.sbatch == {"qos": "high", "exclusive": ""}


def test_a_jobs_gpus_replace_the_spec_devices():
    from radt_ext.sweep.slurm_job import allocated

    assert allocated(["0", "1"], "4,7") == {"0": "4", "1": "7"}  # Slurm gave the job GPUs 4 and 7
    assert allocated(["0"], None) == {} and allocated(["cpu"], "3") == {}
