"""stdout or stderr going away (a reader that closed its pipe, a descriptor closed from the start) never
ends the CLI or the monitor process in a traceback, and never costs the run its end: real pipes, real processes."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import only_run

CLI = [sys.executable, "-m", "radt_ext.cli"]
NOISE = ("Traceback", "BrokenPipeError", "Exception ignored")


def _closed_pipe() -> int:
    """The write end of a pipe whose reader is already gone."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_run_ends_its_run_when_nobody_reads_its_output(tracking_uri):
    gone = _closed_pipe()
    try:
        res = subprocess.run([*CLI, "run", "-l", "top", "-i", "0.05", "--", sys.executable, "-c",
                              "import time; time.sleep(1)"], stdout=gone, stderr=gone, timeout=300)
    finally:
        os.close(gone)
    assert res.returncode == 0  # an exception escaping anywhere would exit 1
    run = only_run(tracking_uri)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["summary/e2e_duration_s"] > 0
    assert int(run.data.tags["radt_ext.metrics_stored"]) == int(run.data.tags["radt_ext.metrics_sent"]) > 0


def test_listeners_into_a_closed_pipe():
    gone = _closed_pipe()
    try:
        res = subprocess.run([*CLI, "listeners"], stdout=gone, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(gone)
    assert res.returncode == 0
    assert not any(word in res.stderr for word in NOISE), res.stderr


def test_listeners_with_stdout_closed_from_the_start():
    res = subprocess.run(["bash", "-c", 'exec "$@" >&-', "-", *CLI, "listeners"], stderr=subprocess.PIPE,
                         text=True, timeout=300)
    assert res.returncode == 0
    assert not any(word in res.stderr for word in NOISE), res.stderr


def test_monitor_process_summarises_when_its_reader_closed_the_pipe(tracking_uri):
    client = MlflowClient(tracking_uri)
    run_id = client.create_run("0").info.run_id
    monitor = subprocess.Popen([sys.executable, "-m", "radt_ext.run.monitor_process", "--run-id", run_id,
                                "--tracking-uri", tracking_uri, "--pid", str(os.getpid()), "--listeners", "top",
                                "--interval", "0.05"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert monitor.stdout.readline().startswith('{"ready": true')
    time.sleep(0.5)
    monitor.stdout.close()  # the reader goes away
    monitor.stdin.close()  # stop: it flushes, logs the summary and prints it into the closed pipe
    err = monitor.stderr.read()
    assert monitor.wait(timeout=120) == 0
    assert not any(word in err for word in NOISE), err
    metrics = client.get_run(run_id).data.metrics
    assert metrics["summary/e2e_duration_s"] > 0 and "summary/proc_avg_cpu_pct" in metrics
