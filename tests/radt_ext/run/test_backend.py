"""`mlflow run DIR --backend radt-ext`: the project backend plugin, through MLflow's own CLI."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import only_run


def _mlflow_run(tmp_path, mlproject: str, work: str, *args: str) -> subprocess.CompletedProcess:
    """A project of MLproject + work.py, run by MLflow's CLI with the radt-ext backend (top every 0.05 s)."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "MLproject").write_text(textwrap.dedent(mlproject))
    (project / "work.py").write_text(textwrap.dedent(work))
    return subprocess.run([sys.executable, "-m", "mlflow", "run", str(project), "--backend", "radt-ext",
                           "--env-manager", "local", *args,
                           "--backend-config", json.dumps({"listeners": "top", "interval": 0.05})],
                          capture_output=True, text=True, timeout=180)


def test_mlflow_run_with_the_radt_ext_backend(tracking_uri, tmp_path):
    res = _mlflow_run(tmp_path, """
        name: tiny
        entry_points:
          main:
            parameters:
              n: {type: float, default: 3}
            command: "python work.py {n}"
    """, """
        import sys, time, mlflow, radt_ext
        with mlflow.start_run():
            mlflow.log_metric("n_seen", float(sys.argv[1]))
            t = time.time()
            while time.time() - t < 0.8:
                radt_ext.log_progress(samples=1); time.sleep(0.01)
    """, "-P", "n=7")
    assert res.returncode == 0, res.stderr[-3000:]
    run = only_run(tracking_uri)
    assert run.info.status == "FINISHED"
    assert run.data.params == {"n": "7"}
    assert run.data.metrics["n_seen"] == 7.0
    assert run.data.tags["radt_ext.listeners"] == "top:0.05"
    assert run.data.tags["mlflow.project.backend"] == "radt-ext"
    assert "system/proc_cpu_pct" in run.data.metrics and run.data.metrics["summary/samples"] > 0


def test_backend_over_a_recipe_style_entry_point_monitors_once(tracking_uri, tmp_path):
    """A recipe's command is itself `radt-ext run -- ...`: under the backend it must pass straight through."""
    res = _mlflow_run(tmp_path, """
        name: nested
        entry_points:
          main:
            command: "radt-ext run --listeners top --interval 0.2 -- python work.py"
    """, "import time, mlflow\nwith mlflow.start_run():\n    time.sleep(0.8)\n")
    assert res.returncode == 0, res.stderr[-3000:]
    run = only_run(tracking_uri)
    assert run.info.status == "FINISHED"
    assert run.data.tags["radt_ext.listeners"] == "top:0.05"  # the outer session's, not a second one
    assert res.stderr.count("radt-ext: run ") == 2  # one session: its start and end lines


# a job that says it started, works for `seconds`, says it ended, and exits with `code`
JOB = """
    name: job
    entry_points:
      main:
        parameters:
          seconds: {type: float, default: 2}
          code: {type: float, default: 0}
        command: "python work.py {seconds} {code}"
"""
WORK = """
    import os, sys, time
    print("job started", flush=True)
    open("started", "w").write(str(os.getpid()))
    time.sleep(float(sys.argv[1]))
    open("ended", "w").write("")
    print("job ended", flush=True)
    sys.exit(int(float(sys.argv[2])))
"""


def _project(tmp_path) -> str:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "MLproject").write_text(textwrap.dedent(JOB))
    (project / "work.py").write_text(textwrap.dedent(WORK))
    return str(project)


def _cli(project: str, *args: str, config: dict | None = None) -> list[str]:
    return [sys.executable, "-m", "mlflow", "run", project, "--backend", "radt-ext", "--env-manager", "local",
            "--backend-config", json.dumps({"listeners": "top", "interval": 0.1, **(config or {})}), *args]


def test_mlflow_run_waits_streams_the_output_and_exits_with_the_jobs_code(tracking_uri, tmp_path):
    project = _project(tmp_path)
    done = subprocess.run(_cli(project, "-P", "seconds=2"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert os.path.exists(os.path.join(project, "ended"))  # the job had ended when mlflow returned
    assert "job started" in done.stdout and "job ended" in done.stdout  # its output came through
    run = only_run(tracking_uri)
    assert run.info.status == "FINISHED" and run.data.tags["mlflow.project.backend"] == "radt-ext"
    assert f"Run (ID '{run.info.run_id}') succeeded" in done.stderr

    os.remove(os.path.join(project, "ended"))
    failed = subprocess.run(_cli(project, "-P", "seconds=0.2", "-P", "code=3", "--run-name", "fails"),
                            capture_output=True, text=True, timeout=300)
    assert failed.returncode == 3, failed.stderr[-3000:]
    client = MlflowClient(tracking_uri)
    (bad,) = client.search_runs([run.info.experiment_id], "attributes.run_name = 'fails'")
    assert bad.info.status == "FAILED" and bad.data.tags["mlflow.project.backend"] == "radt-ext"
    assert f"Run (ID '{bad.info.run_id}') failed (exit code 3)" in failed.stderr


@pytest.mark.alone  # it times a stop after a signal: no other test runs beside it
def test_ctrl_c_stops_the_job_and_its_run_ends_killed(tracking_uri, tmp_path):
    project = _project(tmp_path)
    proc = subprocess.Popen(_cli(project, "-P", "seconds=120"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    started = os.path.join(project, "started")
    deadline = time.time() + 240
    while not os.path.exists(started) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1][-3000:]  # still waiting for the job
    # once radt-ext has its run (its tags on MLflow's run): a stop before that goes to the spool, as a slow
    # host's MLflow import can take longer than the stop's budget (test_run_signals.py covers that way)
    client = MlflowClient(tracking_uri)
    while time.time() < deadline and proc.poll() is None and not any(
            k.startswith("radt_ext.") for r in client.search_runs([e.experiment_id for e in client.search_experiments()])
            for k in r.data.tags):
        time.sleep(0.2)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends mlflow
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]
    assert "stopped by SIGINT" in err
    run = only_run(tracking_uri)
    assert run.info.status == "KILLED"
    assert not psutil.pid_exists(int(open(started).read())) or \
        psutil.Process(int(open(started).read())).status() == psutil.STATUS_ZOMBIE
    assert not os.path.exists(os.path.join(project, "ended"))


def test_an_asynchronous_start_is_asked_for_in_the_backend_config(tracking_uri, tmp_path):
    project = _project(tmp_path)
    start = time.time()
    with open(tmp_path / "log", "w") as log:  # a file: the job holds it on after mlflow has returned
        code = subprocess.run(_cli(project, "-P", "seconds=20", config={"synchronous": False}), stdout=log,
                              stderr=subprocess.STDOUT, timeout=300).returncode
    assert code == 0, (tmp_path / "log").read_text()[-3000:]
    assert not os.path.exists(os.path.join(project, "ended"))  # mlflow returned while the job went on
    run_id = only_run(tracking_uri).info.run_id
    client = MlflowClient(tracking_uri)
    while client.get_run(run_id).info.status == "RUNNING" and time.time() - start < 240:
        time.sleep(0.5)
    assert client.get_run(run_id).info.status == "FINISHED"
    bad = subprocess.run(_cli(project, config={"synchronous": "no"}), capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "backend-config 'synchronous' is 'no'; use true or false" in bad.stderr


def test_from_python_the_backend_waits_as_mlflow_asks(tracking_uri, tmp_path):
    import mlflow.projects
    import pytest
    from mlflow.exceptions import ExecutionException

    project = _project(tmp_path)
    config = {"listeners": "top", "interval": 0.1}
    with pytest.raises(ExecutionException, match="failed"):  # synchronous (MLflow's default): waited, raised
        mlflow.projects.run(project, backend="radt-ext", env_manager="local", backend_config=config,
                            parameters={"seconds": 0.2, "code": 3})
    assert not os.path.exists(os.path.join(project, "started")) or os.path.exists(os.path.join(project, "ended"))
    submitted = mlflow.projects.run(project, backend="radt-ext", env_manager="local", backend_config=config,
                                    parameters={"seconds": 5, "code": 0}, synchronous=False)
    assert submitted.get_status() == "RUNNING"  # returned at once
    assert submitted.wait() is True and submitted.get_status() == "FINISHED"
    assert MlflowClient(tracking_uri).get_run(submitted.run_id).info.status == "FINISHED"
