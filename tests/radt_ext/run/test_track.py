"""`with radt_ext.track():` in a user's script: a real child interpreter, a real store."""
import subprocess
import sys
import textwrap

from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import only_run, stored_system_points

SCRIPT = textwrap.dedent("""
    import os, sys, time, radt_ext, mlflow
    with radt_ext.track(listeners="top", interval=0.05, run_name="tracked", tags={"variant": "api"}) as run:
        mlflow.log_param("batch", 8)
        t = time.time()
        while time.time() - t < 1.0:
            radt_ext.log_progress(samples=8)
            time.sleep(0.01)
        if sys.argv[1] == "raise":
            raise RuntimeError("boom")
    print(run.info.run_id)
""")


def _run(arg):
    return subprocess.run([sys.executable, "-c", SCRIPT, arg], capture_output=True, text=True, timeout=120)


def test_track_samples_from_a_separate_process_into_the_active_run(tracking_uri):
    res = _run("ok")
    assert res.returncode == 0, res.stderr
    run = only_run(tracking_uri)
    assert run.info.run_id == res.stdout.strip().splitlines()[-1]
    assert run.info.status == "FINISHED" and run.info.run_name == "tracked"
    assert run.data.params == {"batch": "8"} and run.data.tags["variant"] == "api"
    m = run.data.metrics
    assert m["summary/samples"] > 0 and m["summary/throughput_samples_per_s"] > 0
    tags = run.data.tags
    readings = int(tags["radt_ext.listener.top.samples"])
    assert readings >= 10  # ~20 a second for about a second
    # every reading's values reached the recorder (9 about once a second, i.e. every 20th reading at 0.05 s, else
    # the tree's CPU, memory and count, read every interval); the timeline artifact holds those that were not a
    # repeat, the store their bounded shape
    full = -(-readings // 20)
    assert int(tags["radt_ext.metrics_full_rate"]) + int(tags["radt_ext.metrics_repeated"]) == 9 * full + 3 * (readings - full)
    assert int(tags["radt_ext.metrics_sent"]) <= int(tags["radt_ext.metrics_full_rate"])
    history = MlflowClient(tracking_uri).get_metric_history(run.info.run_id, "system/proc_cpu_pct")
    assert len(history) >= 2  # its first and last point at least (README, "Repeated values")
    # the monitor ran in another process and watched ours: its CPU is this busy script's
    assert max(h.value for h in history) > 0
    assert stored_system_points(tracking_uri, run) == int(run.data.tags["radt_ext.metrics_sent"])


def test_track_marks_the_run_failed_when_the_block_raises(tracking_uri):
    res = _run("raise")
    assert res.returncode != 0 and "boom" in res.stderr
    run = only_run(tracking_uri)
    assert run.info.status == "FAILED"
    assert "summary/e2e_duration_s" in run.data.metrics


def test_track_bad_listener_fails_before_any_run(tracking_uri):
    res = subprocess.run([sys.executable, "-c", "import radt_ext\nwith radt_ext.track(listeners='nope'): pass"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "unknown listener 'nope'" in res.stderr
    assert MlflowClient(tracking_uri).search_runs(["0"]) == []


def test_track_twice_in_one_process(tracking_uri):
    script = ("import radt_ext\n"
              "for i in range(2):\n"
              "    with radt_ext.track(listeners='top', interval=0.05, run_name=f'r{i}'):\n"
              "        radt_ext.log_progress(samples=1)\n")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    runs = MlflowClient(tracking_uri).search_runs(["0"])
    assert sorted(r.info.run_name for r in runs) == ["r0", "r1"]
    assert all(r.info.status == "FINISHED" for r in runs)
