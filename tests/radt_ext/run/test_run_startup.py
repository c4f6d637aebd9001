"""`radt-ext run` starts the workload first: the store is reached, and the run made, alongside.

Orderings and contents only (the start-up figures are measured by benchmarks/startup/startup.py).
"""
import json
import subprocess
import sys
import textwrap

import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import radt

# the workload's very first act: note when it began, what it was handed, and whether radt-ext's run existed
FIRST = textwrap.dedent("""
    import json, os, sys, time
    began = time.time()
    from radt_ext.markers import monitor_run_id  # the documented path a user calls
    seen = {"began": began, "active": os.environ.get("RADT_EXT_ACTIVE"), "run_id_env": os.environ.get("MLFLOW_RUN_ID"),
            "monitor_run_id": monitor_run_id()}
    time.sleep(1.0)
    json.dump(seen, open(sys.argv[1], "w"))
""")


def _prepared_experiment(uri: str, name: str) -> str:
    client = MlflowClient(uri)
    return client.create_experiment(name)


def test_the_workload_starts_before_the_run_exists_and_its_first_second_is_kept(tracking_uri, tmp_path):
    experiment_id = _prepared_experiment(tracking_uri, "startup")
    seen_path = tmp_path / "seen.json"
    steps = tmp_path / "timings.json"
    res = radt("run", "--listeners", "top", "--interval", "0.05", "--experiment-name", "startup", "--",
               sys.executable, "-c", FIRST, str(seen_path), env={"RADT_EXT_TIMINGS": str(steps)})
    assert res.returncode == 0, res.stderr
    client = MlflowClient(tracking_uri)
    (run,) = client.search_runs([experiment_id])
    seen = json.loads(seen_path.read_text())
    created = json.loads(steps.read_text())["run_created"]
    assert seen["began"] < created  # the workload ran before radt-ext's run was created
    assert run.info.start_time / 1000.0 <= seen["began"]  # and the run starts with the workload's process
    assert seen["monitor_run_id"] == run.info.run_id  # and learnt its id once it existed
    assert seen["active"] != run.info.run_id and seen["run_id_env"] is None  # a run it did not create: not handed over
    history = client.get_metric_history(run.info.run_id, "system/proc_rss_mib")
    assert min(h.timestamp for h in history) / 1000.0 < created  # points read before the run existed are in it
    assert int(run.data.tags["radt_ext.metrics_sent"]) == int(run.data.tags["radt_ext.metrics_stored"])


def test_a_handed_over_run_reaches_the_workload_in_MLFLOW_RUN_ID(tracking_uri, tmp_path):
    run_id = MlflowClient(tracking_uri).create_run("0").info.run_id
    seen_path = tmp_path / "seen.json"
    res = radt("run", "--listeners", "top", "--run-id", run_id, "--", sys.executable, "-c", FIRST, str(seen_path))
    assert res.returncode == 0, res.stderr
    seen = json.loads(seen_path.read_text())
    assert seen["run_id_env"] == seen["active"] == seen["monitor_run_id"] == run_id
    assert MlflowClient(tracking_uri).get_run(run_id).info.status == "FINISHED"


@pytest.mark.parametrize("uri", ["bogus://x", "http://", "http://[::1", "sqlite:/relative.db", "postgresql://",
                                 "http://localhost:port"])
def test_an_unusable_store_uri_is_one_line_before_anything_runs(uri, tmp_path):
    marker = tmp_path / "ran"
    res = radt("run", "--listeners", "top", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')",
               env={"MLFLOW_TRACKING_URI": uri}, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"Error: cannot use the tracking store {uri}: "), res.stderr
    assert not marker.exists()


def test_experiments_radt_ext_makes_open_in_the_training_view(tracking_uri):
    client = MlflowClient(tracking_uri)
    mine = client.create_experiment("mine", tags={"mlflow.experimentKind": "genai_development"})
    for name in ("made-by-radt-ext", "mine"):
        res = radt("run", "--listeners", "top", "--experiment-name", name, "--", "true")
        assert res.returncode == 0, res.stderr
    made = client.get_experiment_by_name("made-by-radt-ext")
    assert made.tags["mlflow.experimentKind"] == "custom_model_development"
    assert client.get_experiment(mine).tags["mlflow.experimentKind"] == "genai_development"  # the user's own


def test_the_package_and_the_cli_import_no_heavy_library():
    code = ("import sys, radt_ext, radt_ext.cli, radt_ext.run.session; "
            "print([m for m in ('mlflow', 'pandas', 'plotly', 'torch', 'numpy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
