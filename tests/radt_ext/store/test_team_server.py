"""Team server: real PostgreSQL + `mlflow server` with basic auth, driven over HTTP.

The topology is the one docker-compose.yml deploys (the server is started by the same
deploy/mlflow-entrypoint.sh and deploy/basic_auth.ini); only the container engine is missing.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import yaml

from radt_ext.store import timelines
from tests.servers import (  # noqa: F401  (fixtures are found by being imported)
    ENTRYPOINT, REPO, mlflow_auth_server, mlflow_sqlite_server, new_password, postgres, start_mlflow_server,
)

RADT = shutil.which("radt-ext")
ENV_EXAMPLE = REPO / "deploy" / ".env.example"
COMPOSE = REPO / "docker-compose.yml"


def _client_env(server, username=None, password=None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "RADT_EXT_PROGRESS", "RADT_EXT_ACTIVE"))}
    env.update(server.env(username, password))
    return env


@functools.lru_cache(maxsize=None)
def _radt_has(command: str) -> bool:
    if RADT is None:
        return False
    probe = subprocess.run([RADT, command, "--help"], capture_output=True, text=True, timeout=60)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def user(mlflow_auth_server):
    """A non-admin user, created by the admin through MLflow's auth client as the docs say."""
    from mlflow.server import get_app_client

    username, password = f"gpu-{uuid.uuid4().hex[:8]}", new_password()
    old = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")}
    os.environ["MLFLOW_TRACKING_USERNAME"] = mlflow_auth_server.username
    os.environ["MLFLOW_TRACKING_PASSWORD"] = mlflow_auth_server.password
    try:
        auth = get_app_client("basic-auth", tracking_uri=mlflow_auth_server.url)
        created = auth.create_user(username=username, password=password)
        assert created.username == username
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return username, password


def _as(monkeypatch, server, username, password):
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", username)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
    return MlflowClient(tracking_uri=server.url)


# ---------------------------------------------------------------- the server itself


def test_user_logs_run_and_artifact_into_postgres(mlflow_auth_server, postgres, user, monkeypatch, tmp_path):
    import psycopg2
    from mlflow.entities import Metric

    client = _as(monkeypatch, mlflow_auth_server, *user)
    exp = client.create_experiment(f"team-{uuid.uuid4().hex[:6]}")
    run = client.create_run(exp)
    client.log_batch(run.info.run_id, metrics=[Metric("system/cpu_pct", float(i), 1000 + i, i) for i in range(7)])
    (tmp_path / "note.txt").write_text("served through the tracking server")
    client.log_artifact(run.info.run_id, str(tmp_path / "note.txt"))
    client.set_terminated(run.info.run_id)

    # the rows are in PostgreSQL, not in some local fallback store
    conn = psycopg2.connect(host=postgres.host, port=postgres.port, user=postgres.user,
                            password=postgres.password, dbname="mlflow")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT status FROM runs WHERE run_uuid = %s", (run.info.run_id,))
            assert cur.fetchone() == ("FINISHED",)
            cur.execute("SELECT count(*) FROM metrics WHERE run_uuid = %s AND key = 'system/cpu_pct'",
                        (run.info.run_id,))
            assert cur.fetchone() == (7,)
    finally:
        conn.close()
    # the artifact went through the server into its artifacts destination
    stored = list((mlflow_auth_server.workdir / "artifacts").rglob("note.txt"))
    assert len(stored) == 1 and stored[0].read_text() == "served through the tracking server"


def test_wrong_password_is_refused(mlflow_auth_server, user, monkeypatch):
    from mlflow.exceptions import MlflowException

    client = _as(monkeypatch, mlflow_auth_server, user[0], "not-" + user[1])
    with pytest.raises(MlflowException, match="401|[Uu]nauthorized"):
        client.search_experiments(max_results=1)


def test_default_experiment_needs_a_grant(mlflow_auth_server, user, monkeypatch):
    """What docs/team-server.md says about permissions: READ by default, EDIT once granted."""
    from mlflow.exceptions import MlflowException
    from mlflow.server import get_app_client

    exp_id = _as(monkeypatch, mlflow_auth_server, mlflow_auth_server.username,
                 mlflow_auth_server.password).create_experiment(f"shared-{uuid.uuid4().hex[:6]}")
    get_app_client("basic-auth", tracking_uri=mlflow_auth_server.url).grant_user_permission(
        username=user[0], resource_type="experiment", resource_id=exp_id, permission="EDIT")
    client = _as(monkeypatch, mlflow_auth_server, *user)
    with pytest.raises(MlflowException, match="403|PERMISSION_DENIED|[Pp]ermission"):
        client.create_run("0")
    assert client.get_experiment("0").name == "Default"  # READ still works
    assert client.create_run(exp_id).info.status == "RUNNING"


def test_anonymous_request_is_refused(mlflow_auth_server):
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{mlflow_auth_server.url}/api/2.0/mlflow/experiments/search?max_results=1")
    assert info.value.code == 401


def test_server_goes_away_and_comes_back_with_its_data(mlflow_sqlite_server):
    """Stop a real server, then start it again on the same port and store: its runs are still there."""
    import urllib.error
    import urllib.request

    from mlflow.tracking import MlflowClient

    server = mlflow_sqlite_server
    run_id = MlflowClient(tracking_uri=server.url).create_run("0").info.run_id
    port = int(server.url.rsplit(":", 1)[1])
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{server.url}/health", timeout=2)
    again = start_mlflow_server(server.backend_store_uri, server.workdir, port=port)
    try:
        assert MlflowClient(tracking_uri=again.url).get_run(run_id).info.run_id == run_id
    finally:
        again.stop()


# ---------------------------------------------------------------- radt-ext against it

WORKLOAD = "import time; time.sleep(1.5)"
INTERVAL = 0.05


@pytest.mark.skipif(not _radt_has("run"), reason="`radt-ext run` is not installed")
def test_radt_ext_run_over_http_stores_every_sample(mlflow_auth_server, user, monkeypatch):
    experiment = f"team-run-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run(
        [RADT, "run", "--listeners", "top", "--interval", str(INTERVAL), "--experiment-name", experiment,
         "--", sys.executable, "-c", WORKLOAD],
        env=_client_env(mlflow_auth_server, *user), capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr

    client = _as(monkeypatch, mlflow_auth_server, *user)
    exp = client.get_experiment_by_name(experiment)
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert "radt_ext.metrics_spooled" not in tags, tags.get("radt_ext.writer_error")

    system_keys = [k for k in run.data.metrics if k.startswith("system/")]
    assert system_keys, sorted(run.data.metrics)
    histories = {k: client.get_metric_history(run.info.run_id, k) for k in system_keys}
    points = sum(len(h) for h in histories.values())
    # every point the writer sent is in the server's history, none lost over HTTP
    assert int(tags["radt_ext.metrics_sent"]) == int(tags["radt_ext.metrics_stored"]) == points
    # and the full rate went through the server too, as the run's timeline artifact
    full = timelines.read(client, run.info.run_id)
    assert full and sum(len(p) for p in full.values()) == int(tags["radt_ext.metrics_full_rate"]) >= points

    # and they were read at the rate asked for (loose: 2 shared CPU cores); a sleeping workload's values
    # repeat, so the store holds fewer points than readings (README, "Repeated values")
    readings = int(tags["radt_ext.listener.top.samples"])
    assert readings >= 0.3 * 1.5 / INTERVAL, readings
    assert int(tags["radt_ext.metrics_repeated"]) > 0


@pytest.mark.skipif(not _radt_has("run"), reason="`radt-ext run` is not installed")
def test_radt_ext_run_wrong_credentials_fails_before_workload(mlflow_auth_server, user, tmp_path):
    marker = tmp_path / "workload-ran"
    proc = subprocess.run(
        [RADT, "run", "--listeners", "top", "--interval", str(INTERVAL), "--experiment-name", "never",
         "--", sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"],
        env=_client_env(mlflow_auth_server, user[0], "wrong-" + user[1]),
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode != 0
    assert not marker.exists(), "the workload ran although the server refused the credentials"
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "MLFLOW_TRACKING_USERNAME" in lines[0] and "MLFLOW_TRACKING_PASSWORD" in lines[0], lines[0]


@pytest.mark.skipif(not _radt_has("sweep"), reason="this radt-ext has no `sweep` command")
def test_radt_ext_sweep_over_http(mlflow_auth_server, user, monkeypatch, tmp_path):
    experiment = f"team-sweep-{uuid.uuid4().hex[:6]}"
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({
        "experiment": experiment,
        "devices": ["cpu"],
        "child_listeners": "top",
        "interval": INTERVAL,
        "modes": ["exclusive"],
        "workloads": {"tiny": {"command": f"{sys.executable} -c 'import time; time.sleep(0.5)'"}},
        "groups": [{"workloads": ["tiny"]}],
        "repeats": 2,
    }))
    proc = subprocess.run([RADT, "sweep", str(spec)], env=_client_env(mlflow_auth_server, *user),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr

    client = _as(monkeypatch, mlflow_auth_server, *user)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id])
    recorded = [r for r in runs if "radt_ext.metrics_stored" in r.data.tags]
    workload_runs = [r for r in recorded if "mlflow.parentRunId" in r.data.tags]
    assert len(workload_runs) == 2  # one per repeat, each a child of its group's parent
    for run in workload_runs:
        points = sum(len(client.get_metric_history(run.info.run_id, k))
                     for k in run.data.metrics if k.startswith("system/"))
        assert points > 0
    for run in recorded:  # parents (device level: nothing on a CPU device) and children alike
        assert run.info.status == "FINISHED"
        points = sum(len(client.get_metric_history(run.info.run_id, k))
                     for k in run.data.metrics if k.startswith("system/"))
        assert int(run.data.tags["radt_ext.metrics_sent"]) == int(run.data.tags["radt_ext.metrics_stored"]) == points


# ---------------------------------------------------------------- deployment files


def _entrypoint(env_overrides: dict[str, str]) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], **env_overrides}
    return subprocess.run(["sh", str(ENTRYPOINT)], env=env, capture_output=True, text=True, timeout=30)


def test_entrypoint_refuses_placeholder_secrets():
    example = dict(line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines()
                   if line and not line.startswith("#"))
    proc = _entrypoint({"POSTGRES_PASSWORD": example["POSTGRES_PASSWORD"],
                        "MLFLOW_AUTH_ADMIN_PASSWORD": example["MLFLOW_ADMIN_PASSWORD"],
                        "MLFLOW_FLASK_SERVER_SECRET_KEY": example["MLFLOW_FLASK_SERVER_SECRET_KEY"]})
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "change-me" in proc.stderr, proc.stderr


def test_entrypoint_names_a_missing_secret():
    proc = _entrypoint({"POSTGRES_PASSWORD": "x" * 16, "MLFLOW_FLASK_SERVER_SECRET_KEY": "y" * 16})
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "MLFLOW_AUTH_ADMIN_PASSWORD" in proc.stderr, proc.stderr


SECRET_KEYS = ("POSTGRES_PASSWORD", "MLFLOW_AUTH_ADMIN_PASSWORD", "MLFLOW_FLASK_SERVER_SECRET_KEY")


def test_compose_file_topology():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "mlflow"}
    for name, service in services.items():
        assert service["healthcheck"]["test"], f"{name} has no health check"
    mlflow = services["mlflow"]
    assert mlflow["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "/health" in " ".join(mlflow["healthcheck"]["test"])
    assert any(v.endswith(":/mlartifacts") for v in mlflow["volumes"])
    dockerfile = REPO / mlflow["build"]["context"] / mlflow["build"]["dockerfile"]
    assert "mlflow[auth]==" in dockerfile.read_text()
    assert "--app-name basic-auth" in ENTRYPOINT.read_text()


def test_compose_secrets_come_from_env_file_only():
    compose = yaml.safe_load(COMPOSE.read_text())
    example_keys = {line.split("=", 1)[0] for line in ENV_EXAMPLE.read_text().splitlines()
                    if line and not line.startswith("#")}
    for name, service in compose["services"].items():
        env = service.get("environment", {})
        for key in SECRET_KEYS:
            if key in env:
                value = env[key]
                match = re.fullmatch(r"\$\{(\w+):\?[^}]+\}", value)
                assert match, f"{name}.{key} must be a required ${{VAR:?...}} from .env, not {value!r}"
                assert match.group(1) in example_keys, f"{match.group(1)} missing from {ENV_EXAMPLE.name}"
    for line in ENV_EXAMPLE.read_text().splitlines():
        key, _, value = line.partition("=")
        if not line.startswith("#") and any(w in key for w in ("PASSWORD", "SECRET")):
            assert value == "change-me", f"{key} in {ENV_EXAMPLE.name} must stay a placeholder"
    tracked = subprocess.run(["git", "ls-files", "--error-unmatch", ".env"], cwd=REPO, capture_output=True)
    assert tracked.returncode != 0, ".env is committed"


@functools.lru_cache(maxsize=None)
def _compose_cli_reason() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "docker CLI not installed"
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"`docker compose` is unavailable: {(probe.stderr or probe.stdout).strip().splitlines()[0]}"
    return None


@pytest.mark.skipif(_compose_cli_reason() is not None, reason=str(_compose_cli_reason()))
def test_docker_compose_config_validates(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text(textwrap.dedent(ENV_EXAMPLE.read_text()).replace("change-me", "0123456789abcdef"))
    proc = subprocess.run(
        ["docker", "compose", "--env-file", str(env_file), "-f", str(COMPOSE), "config", "--quiet"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
