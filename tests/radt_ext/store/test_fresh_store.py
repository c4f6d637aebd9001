"""A SQLite store that does not exist yet is made whole or not at all (radt_ext.store.fresh_store)."""
from __future__ import annotations

import os

from mlflow.tracking import MlflowClient

from radt_ext.store import fresh_store


def test_a_new_store_is_made_whole_and_only_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert fresh_store.make(uri) is True
    assert sorted(os.listdir(tmp_path)) == ["mlflow.db"]  # no temporary file left beside it
    client = MlflowClient(uri)
    assert client.get_experiment("0").name == "Default"
    assert client.get_experiment("0").artifact_location == str(tmp_path / "mlruns" / "0")  # as MLflow's own
    run = client.create_run("0")
    assert fresh_store.make(uri) is False  # there already: left as it is
    assert client.get_run(run.info.run_id).info.status == "RUNNING"


def test_a_store_another_process_made_is_kept_once_its_migrations_are_done(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    MlflowClient(other).search_experiments()  # made by MLflow itself, as a workload's own MLflow would
    os.link(tmp_path / "other.db", tmp_path / "mlflow.db")  # appears under the store's path meanwhile
    assert fresh_store.make(uri, settle=30) is False
    assert MlflowClient(uri).get_experiment("0").name == "Default"
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".making")]


def test_relative_and_other_uris(tmp_path):
    assert fresh_store.sqlite_path("sqlite:///rel/m.db") == "rel/m.db"
    assert fresh_store.sqlite_path(f"sqlite:///{tmp_path}/m.db") == f"{tmp_path}/m.db"
    assert fresh_store.sqlite_path("sqlite:///:memory:") is None
    assert fresh_store.sqlite_path("http://localhost:5000") is None
    assert fresh_store.make("http://localhost:5000") is False
