"""`radt-ext sync` tells a store that is gone (set aside, exit 0) from one that is down (kept, exit 1), against
real SQLite stores and real `mlflow server` processes; `radt-ext sync --list` says what waits and why."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from tests.radt_ext.helpers import radt
from tests.servers import (  # noqa: F401  (fixtures are found by being imported)
    mlflow_auth_server, mlflow_sqlite_server, postgres, start_mlflow_server,
)

WIDE = {"COLUMNS": "1000"}  # the --list table's cells on one line each


def _points(uri: str, run_id: str, n: int = 3) -> str:
    return "".join(json.dumps({"tracking_uri": uri, "run_id": run_id, "key": "system/a_w", "value": float(i),
                               "timestamp": 1000 + i, "step": i}) + "\n" for i in range(n))


def _made(uri: str, run_id: str, experiment_id: str) -> str:
    """The line a run spooled before its store could make it starts with."""
    return json.dumps({"tracking_uri": uri, "run_id": run_id, "kind": "run", "experiment_id": experiment_id,
                       "run_name": "early", "start_time": 900}) + "\n"


def _timelines(spool: Path, uri: str, run_id: str) -> Path:
    """A run's timeline file its end could not store, as run_points leaves it."""
    folder = spool / "timelines" / run_id
    folder.mkdir(parents=True)
    (folder / "system.parquet").write_bytes(b"PAR1")
    (folder / "target.json").write_text(json.dumps({"tracking_uri": uri, "run_id": run_id,
                                                    "error": "timeline artifact not stored (TimeoutError: away)"}))
    return folder


def _why(spool: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (spool / "gone" / f"{name}.why").read_text().splitlines()]


def _listing() -> str:
    done = radt("sync", "--list", env=WIDE, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_sqlite_store_whose_folder_was_deleted_is_set_aside(tracking_uri, tmp_path):
    spool = Path(os.environ["RADT_EXT_SPOOL_DIR"])
    spool.mkdir(parents=True)
    folder = tmp_path / "project"
    folder.mkdir()
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    run_id = MlflowClient(uri).create_run("0").info.run_id
    (spool / f"{run_id}.jsonl").write_text(_points(uri, run_id))
    _timelines(spool, uri, run_id)
    alive = MlflowClient(tracking_uri).create_run("0").info.run_id  # another store's entry, stored as usual
    (spool / f"{alive}.jsonl").write_text(_points(tracking_uri, alive))
    shutil.rmtree(folder)

    listed = _listing()
    assert f"{run_id}.jsonl" in listed and f"timelines/{run_id}" in listed and "not tried yet" in listed
    assert "the run's end: timeline artifact not stored" in listed

    done = radt("sync", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    gone_lines = [line for line in done.stdout.splitlines() if line.startswith("set aside:")]
    assert len(gone_lines) == 2, done.stdout
    for name, line in zip((f"{run_id}.jsonl", f"timelines/{run_id}"), gone_lines):
        assert f"set aside: {name} → {spool / 'gone' / name}" in line and uri in line
        assert f"its folder {folder} no longer exists" in line
    assert not folder.exists()  # no fresh empty store made where the old one was
    assert (spool / "gone" / f"{run_id}.jsonl").read_text() == _points(uri, run_id)  # kept as it was
    assert (spool / "gone" / "timelines" / run_id / "system.parquet").read_bytes() == b"PAR1"
    (note,) = _why(spool, f"{run_id}.jsonl")
    assert note["store"] == uri and note["run"] == run_id and "no longer exists" in note["why"]
    assert len(MlflowClient(tracking_uri).get_metric_history(alive, "system/a_w")) == 3
    assert sorted(p.name for p in spool.iterdir()) == ["gone", "timelines"]  # and timelines/ is empty
    assert not list((spool / "timelines").iterdir())

    again = radt("sync", timeout=60)
    assert again.returncode == 0 and again.stdout.startswith("nothing to sync"), again.stdout + again.stderr
    listed = _listing()
    assert listed.startswith(f"nothing waits in {spool}")
    assert "their store is gone" in listed and f"{run_id}.jsonl" in listed and f"timelines/{run_id}" in listed
    assert f"its folder {folder} no longer exists" in listed


def test_a_deleted_run_or_experiment_is_gone(tracking_uri):
    spool = Path(os.environ["RADT_EXT_SPOOL_DIR"])
    spool.mkdir(parents=True)
    client = MlflowClient(tracking_uri)
    deleted = client.create_run("0").info.run_id
    client.delete_run(deleted)
    doomed = client.create_experiment("doomed")
    client.delete_experiment(doomed)
    in_doomed = client.create_run(client.create_experiment("doomed-later")).info.run_id
    client.delete_experiment(client.get_run(in_doomed).info.experiment_id)
    (spool / f"{deleted}.jsonl").write_text(_points(tracking_uri, deleted))
    (spool / "early.jsonl").write_text(_made(tracking_uri, "early", doomed) + _points(tracking_uri, "early"))
    (spool / "never.jsonl").write_text(_points(tracking_uri, "0123456789abcdef0123456789abcdef"))
    _timelines(spool, tracking_uri, in_doomed)

    done = radt("sync", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"set aside: {deleted}.jsonl" in done.stdout and f"run {deleted} was deleted" in done.stdout
    assert "set aside: early.jsonl" in done.stdout and f"experiment {doomed} was deleted" in done.stdout
    assert "set aside: never.jsonl" in done.stdout and "not in the store" in done.stdout
    assert f"set aside: timelines/{in_doomed}" in done.stdout
    assert sorted(p.name for p in (spool / "gone").iterdir()) == sorted(
        [f"{deleted}.jsonl", f"{deleted}.jsonl.why", "early.jsonl", "early.jsonl.why", "never.jsonl",
         "never.jsonl.why", "timelines"])
    assert client.search_runs([doomed], run_view_type=ViewType.ALL) == []  # no run made in the deleted experiment
    assert client.get_metric_history(deleted, "system/a_w") == []
    assert radt("sync", timeout=60).stdout.startswith("nothing to sync")


def test_one_file_of_a_stored_a_gone_and_a_down_run_is_split_three_ways(tracking_uri):
    spool = Path(os.environ["RADT_EXT_SPOOL_DIR"])
    spool.mkdir(parents=True)
    client = MlflowClient(tracking_uri)
    stored, deleted = client.create_run("0").info.run_id, client.create_run("0").info.run_id
    client.delete_run(deleted)
    dead = "http://127.0.0.1:9"
    lines = _points(tracking_uri, stored) + _points(tracking_uri, deleted) + _points(dead, "r")
    (spool / "mixed.jsonl").write_text(lines + '{"tracking_uri": "cut off by a crash\n')

    done = radt("sync", timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "set aside: mixed.jsonl" in done.stdout and f"run {deleted} was deleted" in done.stdout
    assert f"Error: mixed.jsonl: the store {dead} is down (refused: " in done.stderr
    assert len(client.get_metric_history(stored, "system/a_w")) == 3
    assert (spool / "gone" / "mixed.jsonl").read_text() == _points(tracking_uri, deleted)
    # the store that is down gets its lines back, with the one no run could read
    assert (spool / "mixed.jsonl").read_text() == _points(dead, "r") + '{"tracking_uri": "cut off by a crash\n'
    assert json.loads((spool / "waiting.json").read_text())["mixed.jsonl"]["why"].startswith("refused: ")


def test_a_server_that_is_stopped_is_down_and_a_404_is_gone(tmp_path):
    """While the server runs: a run it does not know and an experiment it does not have (its 404s) are set
    aside. Once it is stopped: its entry is kept, sync exits 1 and --list says why; back, sync stores it."""
    spool = Path(os.environ["RADT_EXT_SPOOL_DIR"])
    spool.mkdir(parents=True)
    backend = f"sqlite:///{tmp_path / 'server.db'}"
    server = start_mlflow_server(backend, tmp_path / "server")
    port = int(server.url.rsplit(":", 1)[1])
    try:
        env = {**server.env(), **WIDE}
        run_id = MlflowClient(server.url).create_run("0").info.run_id
        (spool / "unknown-run.jsonl").write_text(_points(server.url, "0123456789abcdef0123456789abcdef"))
        (spool / "unknown-experiment.jsonl").write_text(_made(server.url, "early", "987654")
                                                        + _points(server.url, "early"))
        done = radt("sync", env=env, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "set aside: unknown-run.jsonl" in done.stdout and "RESOURCE_DOES_NOT_EXIST" in done.stdout
        assert "set aside: unknown-experiment.jsonl" in done.stdout
        assert "experiment 987654 does not exist" in done.stdout
        assert MlflowClient(server.url).search_runs(["0"])[0].info.run_id == run_id  # nothing made
    finally:
        server.stop()

    (spool / f"{run_id}.jsonl").write_text(_points(server.url, run_id))
    assert "not tried yet" in _listing()
    down = radt("sync", env=env, timeout=180)
    assert down.returncode == 1, down.stdout + down.stderr
    (line,) = [line for line in down.stderr.splitlines() if line.strip()]
    assert line.startswith(f"Error: {run_id}.jsonl: the store {server.url} is down (refused: ") and "kept" in line
    assert (spool / f"{run_id}.jsonl").read_text() == _points(server.url, run_id)
    listed = _listing()
    assert f"{run_id}.jsonl" in listed and "refused: " in listed and " ago)" in listed
    assert "unknown-run.jsonl" in listed.split("their store is gone")[1]

    server = start_mlflow_server(backend, tmp_path / "server", port=port)
    try:
        back = radt("sync", env=env, timeout=180)
        assert back.returncode == 0, back.stdout + back.stderr
        assert len(MlflowClient(server.url).get_metric_history(run_id, "system/a_w")) == 3
    finally:
        server.stop()
    assert not (spool / "waiting.json").exists() and not (spool / f"{run_id}.jsonl").exists()


def test_credentials_the_server_refuses_are_down_not_gone(mlflow_auth_server):
    spool = Path(os.environ["RADT_EXT_SPOOL_DIR"])
    spool.mkdir(parents=True)
    client_env = mlflow_auth_server.env()
    run_id = "0123456789abcdef0123456789abcdef"
    (spool / "r.jsonl").write_text(_points(mlflow_auth_server.url, run_id))
    done = radt("sync", env={**client_env, "MLFLOW_TRACKING_PASSWORD": "not-the-password"}, timeout=180)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "is down (credentials refused (HTTP 401; check MLFLOW_TRACKING_USERNAME" in done.stderr
    assert (spool / "r.jsonl").exists() and not (spool / "gone").exists()
