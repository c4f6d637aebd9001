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


def test_later_stores_start_from_the_tables_the_first_one_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kept = tmp_path / "cache" / "radt-ext" / "stores"
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    monkeypatch.chdir(first)
    assert fresh_store.make(f"sqlite:///{first / 'mlflow.db'}") is True
    [template] = os.listdir(kept)
    assert fresh_store._version(kept / template) == fresh_store._version(first / "mlflow.db")
    MlflowClient(f"sqlite:///{first / 'mlflow.db'}").create_experiment("only in the first")
    monkeypatch.chdir(second)
    uri = f"sqlite:///{second / 'mlflow.db'}"
    assert fresh_store.make(uri) is True
    client = MlflowClient(uri)
    assert [e.name for e in client.search_experiments()] == ["Default"]  # nothing of the first store's
    assert client.get_experiment("0").artifact_location == str(second / "mlruns" / "0")  # its own, as MLflow's
    run = client.create_run("0")
    client.log_metric(run.info.run_id, "loss", 0.5)
    assert client.get_run(run.info.run_id).data.metrics == {"loss": 0.5}


def test_kept_tables_mlflow_refuses_are_set_aside_and_the_migrations_run(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert fresh_store.make(f"sqlite:///{tmp_path / 'first.db'}") is True
    [template] = (tmp_path / "cache" / "radt-ext" / "stores").iterdir()
    with sqlite3.connect(template) as conn:  # tables of another MLflow: not at this one's head
        conn.execute("UPDATE alembic_version SET version_num = 'not-a-revision'")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert fresh_store.make(uri) is True
    assert fresh_store._version(tmp_path / "mlflow.db") == fresh_store._version(tmp_path / "first.db")
    assert MlflowClient(uri).get_experiment("0").name == "Default"
    assert fresh_store._version(template) == fresh_store._version(tmp_path / "first.db")  # kept again, whole
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".making")]
