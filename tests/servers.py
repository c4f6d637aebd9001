"""Real servers for tests: a throwaway PostgreSQL cluster and a real `mlflow server` process.

Nothing here is mocked: PostgreSQL runs from the installed binaries (Debian's `postgresql`
package) in a temporary directory, and `mlflow server` runs as a child process on a free loopback
port, optionally with MLflow's basic-auth app. Passwords are generated per test session and never
written anywhere but the temporary directories.

Use the fixtures by importing them into a test module (pytest finds imported fixtures):

    from tests.servers import postgres, mlflow_auth_server  # noqa: F401

Fixtures: `postgres` (session), `mlflow_auth_server` (session; PostgreSQL stores, basic auth,
generated admin in `.username`/`.password`, `.env()` for child processes), `mlflow_sqlite_server`
(per test, no auth: a test may `.stop()` it). Call the helpers directly (`start_postgres`,
`start_mlflow_server`) to bring a stopped server back: pass its `backend_store_uri`, `workdir`
and port (see test_server_goes_away_and_comes_back_with_its_data).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

LOOPBACK = "127.0.0.1"


class ServerUnavailable(RuntimeError):
    """The server cannot be found or started here; tests that need it skip with this reason."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def new_password() -> str:
    return secrets.token_urlsafe(18)


# --------------------------------------------------------------------------- PostgreSQL


def find_pg_bindir() -> Path | None:
    """Directory holding initdb/pg_ctl/postgres: on PATH, else Debian's /usr/lib/postgresql/N/bin."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(os.path.realpath(on_path)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    return Path(candidates[0]).parent if candidates else None


def _run_as_argv(user: str | None) -> list[str]:
    """PostgreSQL refuses to run as root: wrap its commands so they run as an unprivileged user."""
    if user is None:
        return []
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", user, "--"]
    setpriv = shutil.which("setpriv")
    if setpriv:
        pw = pwd.getpwnam(user)
        return [setpriv, f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"]
    raise ServerUnavailable("running as root and neither runuser nor setpriv exists to drop to a user")


@dataclass
class Postgres:
    bindir: Path
    base_dir: Path
    port: int
    user: str
    password: str
    run_as: list[str]
    host: str = LOOPBACK

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "postgres.log"

    def uri(self, database: str = "postgres") -> str:
        # Explicit driver: SQLAlchemy 2.1 defaults postgresql:// to psycopg 3, we ship psycopg2.
        return f"postgresql+psycopg2://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create database `name` (idempotent) and return its SQLAlchemy URI."""
        import psycopg2

        conn = psycopg2.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname="postgres"
        )
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.uri(name)

    def pg_ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.run_as, str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop(self) -> None:
        if self.data_dir.exists():
            self.pg_ctl("-m", "fast", "-w", "stop")
        shutil.rmtree(self.base_dir, ignore_errors=True)


def start_postgres() -> Postgres:
    """initdb + pg_ctl start a fresh cluster on a free loopback port with a generated password.

    Raises ServerUnavailable (with the reason) when the binaries are missing or the server will
    not start, so callers can skip.
    """
    bindir = find_pg_bindir()
    if bindir is None:
        raise ServerUnavailable(
            "PostgreSQL binaries not found (no pg_ctl on PATH or in /usr/lib/postgresql/*/bin); "
            "install them with `apt-get install -y postgresql`"
        )
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        raise ServerUnavailable("psycopg2 is not installed: pip install psycopg2-binary") from None

    run_user = None
    if os.geteuid() == 0:
        run_user = os.environ.get("RADT_TEST_PG_USER", "nobody")
        try:
            pwd.getpwnam(run_user)
        except KeyError:
            raise ServerUnavailable(f"running as root and user {run_user!r} does not exist") from None
    run_as = _run_as_argv(run_user)

    # Not pytest's tmp_path: that is mode 0700 under root and the postgres user could not enter it.
    base_dir = Path(tempfile.mkdtemp(prefix="radt-pg-"))
    if run_user is not None:
        os.chown(base_dir, pwd.getpwnam(run_user).pw_uid, -1)
    pg = Postgres(
        bindir=bindir, base_dir=base_dir, port=free_port(), user="radt",
        password=new_password(), run_as=run_as,
    )
    pwfile = base_dir / "pwfile"
    pwfile.write_text(pg.password + "\n")
    if run_user is not None:
        os.chown(pwfile, pwd.getpwnam(run_user).pw_uid, -1)
    pwfile.chmod(0o600)

    init = subprocess.run(
        [*run_as, str(bindir / "initdb"), "-D", str(pg.data_dir), "-U", pg.user,
         f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"],
        capture_output=True, text=True, timeout=120,
    )
    pwfile.unlink()
    if init.returncode != 0:
        shutil.rmtree(base_dir, ignore_errors=True)
        raise ServerUnavailable(f"initdb failed: {(init.stderr or init.stdout).strip()[-400:]}")

    opts = f"-c listen_addresses={LOOPBACK} -p {pg.port} -k {base_dir} -c fsync=off"
    start = pg.pg_ctl("-l", str(pg.log_path), "-o", opts, "-w", "-t", "60", "start", timeout=90)
    if start.returncode != 0:
        log = pg.log_path.read_text()[-400:] if pg.log_path.exists() else ""
        pg.stop()
        raise ServerUnavailable(f"PostgreSQL did not start: {start.stderr.strip()} {log}".strip())
    return pg


# --------------------------------------------------------------------------- mlflow server


@dataclass
class MlflowServer:
    url: str
    proc: subprocess.Popen
    workdir: Path
    username: str | None = None
    password: str | None = None
    backend_store_uri: str = ""
    log_path: Path = field(default=None)

    def env(self, username: str | None = None, password: str | None = None) -> dict[str, str]:
        """Environment that points an MLflow client (or `radt-ext run`) at this server."""
        env = {"MLFLOW_TRACKING_URI": self.url}
        user = username if username is not None else self.username
        pw = password if password is not None else self.password
        if user is not None:
            env["MLFLOW_TRACKING_USERNAME"] = user
            env["MLFLOW_TRACKING_PASSWORD"] = pw or ""
        return env

    def log_tail(self, chars: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM the server's process group (mlflow CLI + uvicorn workers), SIGKILL if it lingers."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # Workers can outlive the CLI process by a moment; wait until nothing answers the port.
        port = int(self.url.rsplit(":", 1)[1])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _port_open(port):
            time.sleep(0.1)


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((LOOPBACK, port)) == 0


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float, log_path: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-1500:] if log_path and log_path.exists() else ""
            raise ServerUnavailable(f"mlflow server exited with code {proc.returncode}: {tail}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.25)
    raise ServerUnavailable(f"mlflow server at {url} not healthy after {timeout:.0f}s")


REPO = Path(__file__).resolve().parent.parent
ENTRYPOINT = REPO / "deploy" / "mlflow-entrypoint.sh"
AUTH_TEMPLATE = REPO / "deploy" / "basic_auth.ini"


def start_mlflow_server(
    backend_store_uri: str,
    workdir: Path,
    *,
    auth: bool = False,
    auth_database_uri: str | None = None,
    admin_username: str = "admin",
    admin_password: str | None = None,
    port: int | None = None,
    timeout: float = 120,
    extra_args: tuple[str, ...] = (),
) -> MlflowServer:
    """Start `mlflow server` on a loopback port, serving artifacts from `workdir/artifacts`.

    With `auth=True` it runs deploy/mlflow-entrypoint.sh, the script docker-compose.yml runs, so
    the tests exercise the deployed command line and deploy/basic_auth.ini. The auth user store
    defaults to SQLite in `workdir`; the admin password is generated unless given. Returns once
    GET /health answers 200.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    url = f"http://{LOOPBACK}:{port}"
    env = dict(os.environ)
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
                "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME",
                "MLFLOW_AUTH_ADMIN_PASSWORD", "MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_CONFIG_PATH",
                "MLFLOW_SERVER_ALLOWED_HOSTS", "POSTGRES_PASSWORD"):
        env.pop(var, None)
    # The entrypoint calls `python` and `mlflow`: make them this interpreter's.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    # MLflow's GenAI job runner forks ~8 huey consumers: heavy on a small CI box, unused by radt-ext.
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    artifacts = str(workdir / "artifacts")
    username = password = None
    if auth:
        username = admin_username
        password = admin_password or new_password()
        env.update(
            BACKEND_STORE_URI=backend_store_uri,
            AUTH_DATABASE_URI=auth_database_uri or f"sqlite:///{workdir / 'basic_auth.db'}",
            MLFLOW_AUTH_ADMIN_USERNAME=username,
            MLFLOW_AUTH_ADMIN_PASSWORD=password,
            MLFLOW_FLASK_SERVER_SECRET_KEY=secrets.token_hex(32),
            MLFLOW_HOST=LOOPBACK,
            MLFLOW_PORT=str(port),
            MLFLOW_WORKERS="1",
            MLFLOW_ARTIFACTS_DESTINATION=artifacts,
            MLFLOW_AUTH_TEMPLATE=str(AUTH_TEMPLATE),
            MLFLOW_AUTH_CONFIG_PATH=str(workdir / "basic_auth.ini"),
        )
        cmd = ["sh", str(ENTRYPOINT), *extra_args]
    else:
        cmd = [
            sys.executable, "-m", "mlflow", "server",
            "--backend-store-uri", backend_store_uri,
            "--serve-artifacts", "--artifacts-destination", artifacts,
            "--host", LOOPBACK, "--port", str(port), "--workers", "1",
            *extra_args,
        ]
    log_path = workdir / "mlflow-server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
    server = MlflowServer(url=url, proc=proc, workdir=workdir, username=username,
                          password=password, backend_store_uri=backend_store_uri, log_path=log_path)
    try:
        wait_healthy(url, proc, timeout, log_path)
    except BaseException:
        server.stop()
        raise
    return server


# --------------------------------------------------------------------------- pytest fixtures


def started_or_skip(start):
    """What start() starts (a server, a cluster), or the test skipped with the one-line reason it cannot run here."""
    try:
        return start()
    except ServerUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def postgres():
    """A running PostgreSQL cluster for the whole session; skips with the reason if unavailable."""
    pg = started_or_skip(start_postgres)
    yield pg
    pg.stop()


@pytest.fixture(scope="session")
def mlflow_auth_server(postgres, tmp_path_factory):
    """`mlflow server` on PostgreSQL (tracking + auth DBs) with basic auth and artifact serving.

    Exposes `.url`, `.username`/`.password` (the generated admin) and `.env()` for child processes.
    """
    backend = postgres.create_database("mlflow")
    auth_db = postgres.create_database("mlflow_auth")
    try:
        server = start_mlflow_server(
            backend, tmp_path_factory.mktemp("mlflow-server"), auth=True, auth_database_uri=auth_db
        )
    except ServerUnavailable as exc:
        pytest.fail(f"PostgreSQL is up but mlflow server did not start: {exc}")
    yield server
    server.stop()


@pytest.fixture
def mlflow_sqlite_server(tmp_path):
    """A plain `mlflow server` (no auth) on SQLite, one per test, so a test may stop it itself."""
    server = start_mlflow_server(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "server")
    yield server
    server.stop()
