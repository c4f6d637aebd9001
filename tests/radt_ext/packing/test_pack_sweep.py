"""`radt-ext sweep FILE --executor pack` end to end: real child processes, a real SQLite store, NVML
replayed from the 2-GPU trace; the jobs' profiles logged into the store beforehand (store.py) or
recorded by the queue's own first runs."""
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

from radt_ext.packing import profiles, queue
from radt_ext.sweep.spec import load
from tests.radt_ext.helpers import radt, sweep_spec
from tests.radt_ext.packing.store import log_profile
from tests.traces import TWO_GPUS, gpu_name

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "job.py")
LIGHT = (3.0, 2.0, 8.0, 1500.0, 120.0, 0.5)  # SM, DRAM, util %, peak MiB, W, s: four of them fit a GPU


def spec(tmp_path, jobs: dict[str, str], extra: str = "", modes: str = "[naive]", schedule: str = "pack") -> str:
    lines = "\n".join(f"  {name}: {{command: \"{sys.executable} {JOB} {args}\"}}" for name, args in jobs.items())
    body = (f"schedule: {schedule}\n" if schedule else "") + extra + "workloads:\n" + lines + "\n"
    return str(sweep_spec(tmp_path / "queue.yaml", "queue", body, modes=modes))


def profile_all(uri: str, path: str, figures=LIGHT) -> dict[str, str]:
    """Each job's exclusive profile logged into the store; {job name: its sweep hash}."""
    out = {}
    for v in queue.job_variants(load(path)):
        log_profile(uri, "queue", v.workloads[0].key, figures)
        out[queue.job_name(v)] = v.hash
    return out


def finished_jobs(uri: str) -> dict[str, int]:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("queue")
    runs = client.search_runs([exp.experiment_id], "attributes.status = 'FINISHED'", max_results=1000)
    counts: dict[str, int] = {}
    for r in runs:
        if r.data.tags.get("pack.job"):
            counts[r.data.tags["pack.job"]] = counts.get(r.data.tags["pack.job"], 0) + 1
    return counts


def test_profiled_jobs_share_the_gpus_and_each_group_says_why(tmp_path, two_gpus):
    path = spec(tmp_path, {x: "--seconds 0.4" for x in "abcd"})
    hashes = profile_all(two_gpus, path)
    dry = radt("sweep", path, "--dry-run", env={"COLUMNS": "250"})
    assert dry.returncode == 0, dry.stderr
    assert "its start-up beside the job before" in dry.stderr
    assert "4 jobs in 2 groups on 2 GPU(s), 4 in chains" in dry.stderr
    done = radt("sweep", path, "--output", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert finished_jobs(two_gpus) == {h: 1 for h in hashes.values()}
    rows = [r for r in json.loads(done.stdout) if r["mode"] == "naive" and r["status"] == "FINISHED"]
    assert len(rows) == 4
    for row in rows:  # each job's own wall time and slowdown in the results table
        assert row["makespan_s"] > 0.4 and row["avg_slowdown_ratio"] > 0
    client = MlflowClient(two_gpus)
    exp = client.get_experiment_by_name("queue").experiment_id
    groups = client.search_runs([exp], "tags.`pack.decision` LIKE 'naive chain%' and tags.`collocation.size` = '2'")
    assert len(groups) == 2 and {g.data.tags["collocation.gpu"] for g in groups} == {"0", "1"}
    for g in groups:  # each of the pool's GPUs took a chain, and says so as a pooled variant does
        assert g.data.tags["pack.max_slowdown"] == "1.5"
        assert g.data.tags["sweep.device"] == g.data.tags["collocation.gpu"]
        kids = sorted(client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{g.info.run_id}'"),
                      key=lambda k: k.info.start_time)
        assert "pack.start_offset_s" not in kids[0].data.tags and float(kids[1].data.tags["pack.start_offset_s"]) >= 0
        for k in kids:  # beside the prediction, what was measured against the job's exclusive profile
            assert "pack.predicted_slowdown" in k.data.tags and "pack.predicted_energy_j" in k.data.tags
            assert k.data.metrics["summary/e2e_duration_s"] > 0
            assert k.data.tags["sweep.gpu_model"] == gpu_name(TWO_GPUS) and k.data.tags["collocation.slowdown_basis"]
            # the slowdown as the job lived it: its wall time here over its wall time alone
            assert k.data.metrics["summary/slowdown_ratio"] > 0 and k.data.tags["baseline_run_id"]
    report = client.search_runs([exp], "tags.`sweep.role` = 'report'")[0]
    html = open(os.path.join(report.info.artifact_uri.replace("file://", ""), "radt_ext_sweep_report.html")).read()
    assert "Packing: predicted against measured" in html and "predicted wall s" in html
    again = radt("sweep", path)  # nothing twice
    assert again.returncode == 0 and again.stderr.count("FINISHED before in a packed group") == 4
    assert finished_jobs(two_gpus) == {h: 1 for h in hashes.values()}


def test_each_job_is_one_pooled_variant_whose_hashes_name_no_gpu(tmp_path):
    path = spec(tmp_path, {"a": "--seconds 0.3", "b": "--seconds 0.3"})
    one = queue.job_variants(load(path))
    with open(path) as f:
        text = f.read().replace('devices: ["0", "1"]', 'devices: ["1"]')
    with open(path, "w") as f:
        f.write(text)
    other = queue.job_variants(load(path))
    assert [v.device for v in one] == ["pool", "pool"] and one[0].pool == ["0", "1"]
    # a profile or a packed run on any GPU is the job's, whichever pool it is queued on next
    assert [(v.hash, v.workloads[0].key) for v in one] == [(v.hash, v.workloads[0].key) for v in other]


@pytest.mark.parametrize("extra, message", [
    ("device_mode: each\n", "device_mode: each: schedule: pack places each job once on the pool"),
    ("gpus_per_variant: 2\n", "gpus_per_variant: 2: schedule: pack shares one GPU among jobs"),
])
def test_fixed_devices_and_jobs_over_several_gpus_are_refused(tmp_path, extra, message):
    res = radt("sweep", spec(tmp_path, {"a": "--seconds 0.3"}, extra=extra), "--dry-run")
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_job_without_a_profile_runs_alone_first(tmp_path, two_gpus):
    path = spec(tmp_path, {"a": "--seconds 0.3", "b": "--seconds 0.3"})
    hashes = profile_all(two_gpus, path)
    path = spec(tmp_path, {"a": "--seconds 0.3", "b": "--seconds 0.3", "new": "--seconds 0.35"})
    dry = radt("sweep", path, "--dry-run", env={"COLUMNS": "250"})
    assert "no exclusive profile in the store: runs alone first and is profiled" in dry.stderr
    assert radt("sweep", path).returncode == 0
    client = MlflowClient(two_gpus)
    exp = client.get_experiment_by_name("queue").experiment_id
    alone = [r for r in client.search_runs([exp], "tags.`pack.decision` = 'alone: new-2'")
             if "mlflow.parentRunId" not in r.data.tags]
    assert len(alone) == 1 and alone[0].data.tags["collocation.mode"] == "exclusive"
    assert alone[0].data.tags["sweep.place"] == "pool" and alone[0].data.tags["sweep.device"] in ("0", "1")
    assert set(finished_jobs(two_gpus)) == set(hashes.values()) | {alone[0].data.tags["sweep.hash"]}
    # the run is the new job's profile now: a dry run of the same queue plus a copy of it plans from it
    profiled = queue.job_variants(load(path))[2].workloads[0].key
    p = profiles.read(client, "queue").profiles[profiled]
    assert p.run_id and p.phase == "active phase"


def test_an_interrupted_queue_resumes_without_running_a_job_twice(tmp_path, two_gpus):
    hold = tmp_path / "hold"
    started = tmp_path / "started"
    jobs = {"a": "--seconds 0.3", "b": "--seconds 0.3", "c": "--seconds 0.3",
            "slow": f"--hold-if {hold} --started {started}"}
    path = spec(tmp_path, jobs)
    hashes = profile_all(two_gpus, path)
    hold.touch()
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "sweep", path], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    deadline = time.time() + 120
    while not started.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    assert started.exists(), proc.communicate()[0] if proc.poll() is not None else "the slow job never started"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, out
    first = finished_jobs(two_gpus)
    assert hashes["slow-3"] not in first  # stopped: not FINISHED, so the re-run runs it
    hold.unlink()
    again = radt("sweep", path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stderr.count("FINISHED before in a packed group") == len(first)
    assert finished_jobs(two_gpus) == {h: 1 for h in hashes.values()}  # every job once, none twice


def test_an_mps_chain_runs_under_one_daemon_without_thread_caps(tmp_path, tracking_uri, standins):
    from tests.radt_ext.collocation.support import MPS_GPU

    seen = tmp_path / "env.txt"
    path = tmp_path / "queue.yaml"
    path.write_text(textwrap.dedent(f"""
        name: queue
        devices: ["{MPS_GPU}"]
        child_listeners: top
        interval: 0.2
        schedule: pack
        modes: [mps]
        max_slowdown: 2
        workloads:
          a: {{command: "{sys.executable} {JOB} --seconds 0.3 --env-to {seen}"}}
          b: {{command: "{sys.executable} {JOB} --seconds 0.4 --env-to {seen}"}}
    """))
    profile_all(tracking_uri, str(path), figures=(60.0, 20.0, 60.0, 1500.0, 200.0, 0.5))
    res = radt("sweep", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(line.split()[1] for line in seen.read_text().splitlines()) == ["-", "-"]  # no thread caps
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("queue").experiment_id
    (group,) = [r for r in client.search_runs([exp], "tags.`collocation.mode` = 'mps'")
                if "mlflow.parentRunId" not in r.data.tags]
    assert group.data.tags["pack.decision"] in ("mps chain of 2: a-0 > b-1", "mps chain of 2: b-1 > a-0")
    assert len([c for c in standins.calls("nvidia-cuda-mps-control") if c.get("stdin") == ["quit"]]) == 1


@pytest.mark.parametrize("extra, schedule, message", [
    ("max_slowdown: 0.9\n", "pack", "queue.yaml: max_slowdown: 0.9 is not a bound on slowdown; give a number >= 1"),
    ("", "packed", "queue.yaml: schedule: 'packed' is not a schedule; use one of pack"),
    ("pack: {mps_thread_percentage: 50}\n", "pack", "pack.mps_thread_percentage: no longer an option (chains set"),
    ("pack: {max_gpus: 2}\n", "pack", "pack.max_gpus: unknown field; use one of max_jobs_per_gpu"),
    ("pack: {guard: maybe}\n", "pack", "pack.guard: expected true or false, got 'maybe'"),
])
@pytest.mark.new_store
def test_bad_input_is_one_line_before_anything_runs(tmp_path, two_gpus, extra, schedule, message):
    path = spec(tmp_path, {"a": "--seconds 0.3"}, extra=extra, schedule=schedule)
    res = radt("sweep", path)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not os.path.exists(two_gpus[len("sqlite:///"):])  # nothing recorded, not even a store


@pytest.mark.new_store
def test_unknown_modes_and_groups_of_several_jobs_are_refused(tmp_path, two_gpus):
    res = radt("sweep", spec(tmp_path, {"a": "--seconds 0.3"}, modes="[teleport]"))
    assert res.returncode == 2 and "modes[0]: unknown mode 'teleport'" in res.stderr
    res = radt("sweep", spec(tmp_path, {"a": "--seconds 0.3"}, modes="[mig]"), "--executor", "pack")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    path = spec(tmp_path, {"a": "--seconds 0.3", "b": "--seconds 0.3"}, extra="groups: [[a, b]]\n")
    res = radt("sweep", path, "--dry-run")
    assert res.returncode == 2 and "groups[0]: 'a+b' has 2 workloads; schedule: pack decides" in res.stderr
    assert not os.path.exists(two_gpus[len("sqlite:///"):])


def test_the_queue_runs_with_plain_output_where_rich_is_missing(tmp_path, tracking_uri, monkeypatch, capsys):
    from radt_ext.packing import run
    from radt_ext.sweep import console

    monkeypatch.setattr(console, "HAVE_RICH", False)  # the GPU hosts carry only what MLflow needs
    sweep = load(spec(tmp_path, {"a": "--seconds 0.2", "b": "--seconds 0.2"}))
    sweep.devices, sweep.listeners = ["cpu"], "top"
    outcomes = run.run(sweep, console=console.PlainConsole())
    assert [o.status for o in outcomes] == ["FINISHED", "FINISHED"]
    err = capsys.readouterr().err
    assert "gpu cpu: alone: a-0: no exclusive profile in the store" in err and "sweep queue: report" in err


@pytest.mark.new_store
def test_pairs_from_naming_no_experiment_is_one_line_with_nothing_to_run_too(tmp_path, two_gpus):
    """Said before anything runs: on a dry run before the store exists, and on a store that lacks it."""
    path = spec(tmp_path, {"a": "--seconds 0.3"}, extra="pack: {pairs_from: [nowhere]}\n")
    message = "pack.pairs_from: no experiment 'nowhere' in the store"
    for args in (("--dry-run",), ()):
        res = radt("sweep", path, *args)
        assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not os.path.exists(two_gpus[len("sqlite:///"):])  # no store made
    MlflowClient(two_gpus).create_experiment("elsewhere")
    res = radt("sweep", path)
    assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert MlflowClient(two_gpus).get_experiment_by_name("queue") is None  # nothing ran
