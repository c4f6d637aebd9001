"""Sweeps end to end on CPU: dry run, execution, resume by content hash, the Python API,
and radT CSV files (read, never written)."""
from __future__ import annotations

import hashlib
import os
import sys
import textwrap

import pytest
from mlflow.tracking import MlflowClient

from radt_ext import sweep
from tests.radt_ext.collocation.support import WORKLOAD
from tests.radt_ext.helpers import parent_runs, radt


def spec(tmp_path, sizes, name="s.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(f"""
        name: cpu
        experiment: cpu-sweep
        devices: [cpu]
        interval: 0.1
        workloads:
          toy: {{command: "{sys.executable} {WORKLOAD} --seconds 0.4 --batch-size {{bs}}", params: {{bs: 8}}}}
        groups:
          - {{workloads: [toy], modes: [exclusive]}}
          - {{workloads: [toy, toy], modes: [naive]}}
        grid: {{bs: {sizes}}}
    """))
    return path



@pytest.mark.new_store
def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path, tracking_uri):
    done = radt("sweep", str(spec(tmp_path, [8, 16])), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "4 variants, 4 to run, 0 done (dry run: nothing ran)" in done.stdout
    assert "exclusive toy on cpu bs=8" in done.stderr and "naive toy+toy on cpu bs=16" in done.stderr
    assert "--batch-size 16" in done.stderr
    assert not os.path.exists(tracking_uri[len("sqlite:///"):])  # not even a store was created


def test_run_then_resume_skips_finished_variants(tmp_path, tracking_uri):
    first = sweep.run(sweep.plan(spec(tmp_path, [8])))
    assert [o.status for o in first] == ["FINISHED", "FINISHED"]
    naive = first[1]
    assert naive.summary["avg_slowdown_ratio"] > 0  # against the exclusive run of the same command
    client = MlflowClient(tracking_uri)
    run = client.get_run(naive.run_id)
    assert run.data.tags["sweep.id"] == "cpu" and run.data.tags["sweep.hash"] == naive.variant.hash
    assert run.data.tags["sweep.param.bs"] == "8"
    # a bigger grid: the bs=8 variants are FINISHED in MLflow (matched by sweep.hash) and skipped
    again = sweep.run(sweep.plan(spec(tmp_path, [8, 16])))
    assert [o.status for o in again] == ["SKIPPED", "FINISHED", "SKIPPED", "FINISHED"]
    assert again[0].run_id == first[0].run_id
    assert len(parent_runs(tracking_uri)) == 4
    # a failed or killed variant is not FINISHED: it would run again
    client.set_terminated(first[1].run_id, "KILLED")
    dry = sweep.run(sweep.plan(spec(tmp_path, [8, 16])), dry_run=True)
    assert [o.status for o in dry] == ["SKIPPED", "SKIPPED", "PLANNED", "SKIPPED"]


def test_cli_runs_and_exits_zero(tmp_path, tracking_uri):
    done = radt("sweep", str(spec(tmp_path, [8])))
    assert done.returncode == 0, done.stderr
    assert "sweep results" in done.stderr and len(parent_runs(tracking_uri)) == 2


RADT_CSV = """Experiment,Workload,Status,Run,Devices,Collocation,    File,    Listeners,Params
         1,       1,      ,   ,      0,          -,{wl},smi+top,--seconds 0.3 --batch-size 8
         1,       1,      ,   ,      0,          -,{wl},smi+top,--seconds 0.3 --batch-size 16
         1,       2,      ,   ,      0,          -,{wl},top+dcgmi,seconds=0.3
         2,       1,FINISHED x (0),abc,      0,          -,{wl},top,--seconds 0.3
"""


def test_radt_csv_is_read_not_written(tmp_path, two_gpus):  # the file's rows run on GPU 0 (replayed NVML)
    tracking_uri = two_gpus
    path = tmp_path / "experiment.csv"
    path.write_text(RADT_CSV.format(wl=WORKLOAD))
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    variants = sweep.plan(path)
    # experiment 2 is FINISHED in the file: skipped as radT does; 1+1 shares GPU 0 → naive; 1+2 alone
    assert [(v.experiment, v.label, v.mode, len(v.workloads)) for v in variants] == [
        ("1", "workload-2", "exclusive", 1), ("1", "workload-1", "naive", 2)]
    naive = variants[1]
    assert naive.workloads[1].command[-4:] == ["--seconds", "0.3", "--batch-size", "16"]
    assert variants[0].workloads[0].command[-1] == "--seconds=0.3"  # radT's old k=v form
    assert naive.child_listeners == "top" and naive.workloads[0].device == "0"
    outcomes = sweep.run(variants)
    assert [o.status for o in outcomes] == ["FINISHED", "FINISHED"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # the user's file is untouched
    run = MlflowClient(tracking_uri).get_run(outcomes[1].run_id)
    assert run.data.tags["radt.workload"] == "1" and run.data.tags["collocation.mode"] == "naive"
    assert [o.status for o in sweep.run(sweep.plan(path))] == ["SKIPPED", "SKIPPED"]


@pytest.mark.parametrize("text, message", [
    ("Experiment,Workload,Devices\n1,1,0\n", "experiment.csv: header: column Collocation is missing"),
    ("Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n1,1,,,0,weird,x.py,top,\n",
     "experiment.csv: row 2: column Collocation: 'weird' is not -, mps or a MIG profile"),
    ("Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n1,1,,,0,-,x.py,nvidia,\n",
     "experiment.csv: row 2: column Listeners: unknown listener 'nvidia'"),
    ("Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params\n1,1,,,,-,x.py,top,\n",
     "experiment.csv: row 2: column Devices is empty"),
])
def test_malformed_csv_is_one_line(tmp_path, tracking_uri, text, message):
    path = tmp_path / "experiment.csv"
    path.write_text(text)
    done = radt("sweep", str(path))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert path.read_text() == text


def test_a_refused_group_does_not_stop_the_sweep(tmp_path, tracking_uri, standins):
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(f"""
        name: refused
        interval: 0.1
        workloads:
          toy: {{command: "{sys.executable} {WORKLOAD} --seconds 0.2", mig: 9g.999gb}}
        groups:
          - {{workloads: [toy], modes: [mig, naive]}}
    """))
    outcomes = sweep.run(sweep.plan(path))
    assert [(o.variant.mode, o.status) for o in outcomes] == [("mig", "REFUSED"), ("naive", "FINISHED")]
    done = radt("sweep", str(path))
    assert done.returncode == 1 and "REFUSED: MIG instances 9g.999gb do not exist" in done.stderr


def test_dry_run_against_a_server_that_does_not_answer_still_prints_the_plan(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{s.getsockname()[1]}"
    done = radt("sweep", str(spec(tmp_path, [8])), "--dry-run", env={"MLFLOW_TRACKING_URI": uri}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "the server does not answer" in done.stderr and "the plan shows no runs as done" in done.stderr
    assert "2 variants, 2 to run, 0 done (dry run: nothing ran)" in done.stdout
