"""`radt-ext run` end to end: real child processes, a real SQLite store, real signals."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import only_run, radt, stored_system_points

WORKLOAD = textwrap.dedent("""
    import sys, time, radt_ext
    t = time.time()
    while time.time() - t < 1.0:
        radt_ext.log_progress(samples=32)
        time.sleep(0.01)
    sys.exit(int(sys.argv[1]))
""")
# a script that writes into the run it is handed (MLFLOW_RUN_ID, as under `mlflow run`)
RESUMING = textwrap.dedent("""
    import sys, time, mlflow
    with mlflow.start_run():
        mlflow.log_param("lr", 0.1)
        time.sleep(1.0)
    sys.exit(int(sys.argv[1]))
""")


def test_success_lands_in_one_finished_run_with_system_metrics(tracking_uri):
    res = radt("run", "--listeners", "top", "--interval", "0.05", "--run-name", "smoke", "--tag", "variant=a",
               "--", sys.executable, "-c", WORKLOAD, "0")
    assert res.returncode == 0, res.stderr
    run = only_run(tracking_uri)
    assert run.info.status == "FINISHED" and run.info.run_name == "smoke"
    assert run.data.tags["radt_ext.workload_runs"] == "0"  # a script that starts no run: radt-ext's run only
    assert run.data.tags["variant"] == "a"
    assert run.data.tags["radt_ext.listeners"] == "top:0.05"
    assert "machine.cpu_model" in run.data.tags
    m = run.data.metrics
    assert m["summary/samples"] > 0 and m["summary/throughput_samples_per_s"] > 0
    assert 0.9 < m["summary/e2e_duration_s"] < 30
    assert int(run.data.tags["radt_ext.listener.top.samples"]) >= 10  # readings taken; the store keeps no repeat
    history = MlflowClient(tracking_uri).get_metric_history(run.info.run_id, "system/proc_rss_mib")
    assert len(history) >= 2  # its first and last point at least (README, "Repeated values")
    steps = [h.step for h in sorted(history, key=lambda h: h.timestamp)]
    assert steps == sorted(steps)  # step = ms since start, so it grows with time
    assert stored_system_points(tracking_uri, run) == int(run.data.tags["radt_ext.metrics_sent"])


def test_failure_propagates_exit_code_and_keeps_every_sample(tracking_uri):
    res = radt("run", "--listeners", "top", "--interval", "0.05", "--", sys.executable, "-c", WORKLOAD, "3")
    assert res.returncode == 3
    run = only_run(tracking_uri)
    assert run.info.status == "FAILED"
    assert run.data.tags["radt_ext.exit_code"] == "3"
    sent = int(run.data.tags["radt_ext.metrics_sent"])
    assert sent > 0 and stored_system_points(tracking_uri, run) == sent


def test_unknown_listener_is_one_line_and_nothing_runs(tracking_uri, tmp_path):
    marker = tmp_path / "ran"
    res = radt("run", "--listeners", "top,bogus", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')")
    assert res.returncode == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert "unknown listener 'bogus'" in res.stderr and "Traceback" not in res.stderr
    assert lines[-1].startswith("Error:") and len([ln for ln in lines if ln.startswith("Error")]) == 1
    assert not marker.exists()
    assert MlflowClient(tracking_uri).search_runs(["0"]) == []


@pytest.mark.parametrize("spec,words", [("top:fast", "not a number"), ("top:0", "out of range"),
                                        ("top,top", "named twice"), ("top,,", "empty entry")])
def test_bad_listener_specs(tracking_uri, spec, words):
    res = radt("run", "--listeners", spec, "--", "true")
    assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr


@pytest.mark.new_store
def test_missing_command_is_one_line(tracking_uri):
    res = radt("run", "--listeners", "top", "--", "no-such-program-radt")
    assert res.returncode == 2 and "cannot start 'no-such-program-radt'" in res.stderr
    # bad input, found before any store work (the workload starts first): no run, and no store made for it
    assert not os.path.exists(tracking_uri[len("sqlite:///"):])


def test_joins_the_run_in_MLFLOW_RUN_ID(tracking_uri):
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    res = radt("run", "--listeners", "top", "--interval", "0.05", "--", sys.executable, "-c", RESUMING, "0",
               env={"MLFLOW_RUN_ID": run_id})
    assert res.returncode == 0, res.stderr
    run = only_run(tracking_uri)
    assert run.info.run_id == run_id and run.data.params == {"lr": "0.1"}
    assert "system/proc_cpu_pct" in run.data.metrics


def test_sigterm_stops_the_whole_tree_and_marks_killed(tracking_uri, tmp_path):
    pidfile = tmp_path / "pids"
    tree = textwrap.dedent(f"""
        import subprocess, sys, time, os
        kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open({str(pidfile)!r}, "w").write(f"{{os.getpid()}} {{kid.pid}}")
        time.sleep(300)
    """)
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "run", "--listeners", "top", "--interval", "0.05",
                             "--", sys.executable, "-c", tree], stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:  # the run exists (made while the workload starts; a stop before is spooled)
        if line.startswith("radt-ext: run ") and " in experiment " in line:
            break
    deadline = time.time() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(0.5)
    pids = [int(p) for p in pidfile.read_text().split()]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    run = only_run(tracking_uri)
    assert run.info.status == "KILLED"
    sent = int(run.data.tags["radt_ext.metrics_sent"])
    assert sent > 0 and stored_system_points(tracking_uri, run) == sent


def test_listeners_command_lists_every_listener_with_a_reason():
    res = radt("listeners")
    assert res.returncode == 0, res.stderr
    for name in ("nvml", "gpm", "smi", "dcgm", "top", "perf", "rapl"):
        assert name in res.stdout


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_does_not_answer_is_one_line_before_the_workload(tmp_path):
    uri = f"http://127.0.0.1:{_closed_port()}"
    marker = tmp_path / "ran"
    # MLflow's own client retries for minutes; the timeout fails the test if we wait for it
    res = radt("run", "--listeners", "top", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')",
               env={"MLFLOW_TRACKING_URI": uri}, timeout=60)
    assert res.returncode == 2
    errors = [ln for ln in res.stderr.splitlines() if "Error" in ln]
    assert len(errors) == 1 and f"cannot use the tracking store {uri}: the server does not answer" in errors[0]
    assert not marker.exists()  # the workload never started


@pytest.mark.new_store
def test_a_new_experiment_in_a_new_store_is_made_alongside_the_workload(tracking_uri):
    assert not os.path.exists(tracking_uri[len("sqlite:///"):])
    res = radt("run", "--listeners", "top", "--experiment-name", "fresh", "--", sys.executable, "-c",
               "import os; print(os.environ.get('MLFLOW_EXPERIMENT_NAME'), os.environ.get('MLFLOW_EXPERIMENT_ID'))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["fresh", "None"]  # its id was not known yet: the workload gets the name
    run = only_run(tracking_uri)
    experiment = MlflowClient(tracking_uri).get_experiment(run.info.experiment_id)
    assert experiment.name == "fresh" and experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    assert run.info.status == "FINISHED"
