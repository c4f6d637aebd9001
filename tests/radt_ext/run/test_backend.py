"""`mlflow run DIR --backend radt-ext`: the project backend plugin, through MLflow's own CLI."""
import json
import subprocess
import sys
import textwrap

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
