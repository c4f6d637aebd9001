"""`radt-ext ui`: MLflow's UI on the store radt-ext writes to, and the link to each comparison view.

A local store (SQLite, PostgreSQL, a folder) gets `mlflow server` (what `mlflow ui` runs) on
127.0.0.1:5000 unless told otherwise, in the foreground until Ctrl-C; a tracking server is already
serving its UI, so only the links are printed.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import click

from radt_ext.errors import UsageError

START_TIMEOUT_S = 120.0


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2):
            return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _experiments(client, name: str | None) -> list[str]:
    """The experiment named, else every one that holds radt-ext's view (newest first)."""
    from radt_ext.view.write import TAG

    if name is not None:
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise UsageError(f"no experiment named {name!r} in this store; leave out --experiment-name to list "
                             "every experiment radt-ext wrote")
        return [experiment.experiment_id]
    found = client.search_experiments(max_results=1000, order_by=["last_update_time DESC"])
    return [e.experiment_id for e in found if TAG in e.tags]


def _links(client, uri: str, name: str | None, ui_url: str | None) -> list[str]:
    from radt_ext.view.write import link_line, refresh_quietly

    ids = _experiments(client, name)
    for experiment_id in ids:
        refresh_quietly(client, experiment_id)  # written, or brought up to this version's view
    return [link_line(uri, i, ui_url) for i in ids]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="address the UI listens on")
@click.option("--port", type=click.IntRange(1, 65535), default=5000, show_default=True)
@click.option("--experiment-name", default=None, help="link this experiment only (default: every one radt-ext wrote)")
def ui(host, port, experiment_name):
    """Start MLflow's UI on the store in use (MLFLOW_TRACKING_URI, else ./mlflow.db) and print the link
    to each experiment's comparison view."""
    import mlflow

    from radt_ext.store.client import connect, tracking_uri
    from radt_ext.view.write import version_note

    uri = tracking_uri()
    note = version_note(mlflow.__version__)
    if uri.startswith(("http://", "https://")):
        client = connect(uri)
        lines = _links(client, uri, experiment_name, None)
        click.echo(f"radt-ext: {uri} is a tracking server; its UI is already there", err=True)
        for line in lines or [f"radt-ext: no experiment in {uri} has radt-ext's view yet"]:
            click.echo(line)
        if note:
            click.echo(note, err=True)
        return
    if not _port_free(host, port):
        raise UsageError(f"port {port} on {host} is in use (another `mlflow ui`?); pass --port")
    client = connect(uri)
    ui_url = f"http://{host}:{port}"
    lines = _links(client, uri, experiment_name, ui_url)
    env = dict(os.environ)
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")  # MLflow's GenAI job workers: unused here
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", host,
           "--port", str(port)]
    server = subprocess.Popen(cmd, env=env)
    # Ctrl-C and SIGTERM only set a flag: an interrupt raised inside Popen.poll() could leave its lock taken,
    # and the wait for the server below would then never end
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stopped.set())
    try:
        deadline = time.time() + START_TIMEOUT_S
        while not stopped.is_set() and not _answers(ui_url):
            if server.poll() is not None:
                raise UsageError(f"mlflow server on {uri} stopped at start (exit {server.returncode}); "
                                 "its output is above")
            if time.time() > deadline:
                raise UsageError(f"mlflow server on {uri} did not answer within {START_TIMEOUT_S:g} s")
            time.sleep(0.3)
        if not stopped.is_set():
            click.echo(f"radt-ext: MLflow's UI on {uri} at {ui_url} (Ctrl-C stops it)", err=True)
            for line in lines or [f"radt-ext: no experiment in {uri} has radt-ext's view yet; "
                                  f"its runs are at {ui_url}"]:
                click.echo(line)
            if note:
                click.echo(note, err=True)
        while server.poll() is None and not stopped.wait(0.2):
            pass
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    sys.exit(0 if server.returncode in (0, -signal.SIGINT, 130) else server.returncode)
