"""What can be known of a tracking store before MLflow is imported (importing it takes seconds).

`radt-ext run` asks this module whether the store URI is usable, whether a server answers and accepts
the credentials, and where an experiment or a handed-over run is, so that bad input is refused in one
line and the workload can start while MLflow is still being imported. It reads an `http(s)://` server
through MLflow's REST API and a `sqlite:///` file read-only through the standard library. A SQLite file
that does not exist yet (in a folder that does) is `fresh`: it is made, with its Default experiment (id
0), while the workload starts (fresh_store.py). Whatever it cannot tell (another kind of store, a file
that is not an MLflow store) it answers with None, and the caller asks MLflow, before the workload starts.
"""
from __future__ import annotations

import base64
import json
import os
import sqlite3
import urllib.parse
from dataclasses import dataclass

from radt_ext.errors import UsageError
from radt_ext.store import fresh_store

DEFAULT_URI = "sqlite:///mlflow.db"  # MLflow's default, unless ./mlruns holds a file store's experiments
DEFAULT_FILE_STORE = "./mlruns"
DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
BUILTIN_SCHEMES = ("", "file", "http", "https", "databricks", "databricks-uc", "uc", "mlflow-artifacts") + DB_SCHEMES
TLS_SETTINGS = ("MLFLOW_TRACKING_INSECURE_TLS", "MLFLOW_TRACKING_SERVER_CERT_PATH", "MLFLOW_TRACKING_CLIENT_CERT_PATH")
TIMEOUT_S = 5.0


def tracking_uri(explicit: str | None = None) -> str:
    """The store MLflow would use: the argument, MLFLOW_TRACKING_URI, ./mlruns when it holds a file
    store's experiments, else sqlite:///mlflow.db (mlflow.get_tracking_uri's rule, without MLflow)."""
    uri = explicit or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    try:
        with os.scandir(DEFAULT_FILE_STORE) as entries:
            if any(e.is_dir() and e.name.isdigit() and os.path.lexists(os.path.join(e.path, "meta.yaml"))
                   for e in entries):
                return DEFAULT_FILE_STORE
    except OSError:
        pass
    return DEFAULT_URI


def _refuse(uri: str, why: str, hint: str = "check MLFLOW_TRACKING_URI") -> UsageError:
    return UsageError(f"cannot use the tracking store {uri}: {why}; {hint}")


def _plugin_schemes() -> set[str]:
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group="mlflow.tracking_store")}


def check_uri(uri: str) -> str:
    """The URI's scheme; a one-line UsageError for a URI no store answers to (unknown scheme, malformed)."""
    hint = "use e.g. sqlite:///mlflow.db, http://host:5000 or a postgresql:// URI in MLFLOW_TRACKING_URI"
    try:
        parsed = urllib.parse.urlparse(uri)
        parsed.port  # noqa: B018 -- raises on a port that is not a number
    except ValueError as exc:
        raise _refuse(uri, f"it is not a valid URI ({exc})", hint) from None
    scheme = parsed.scheme.lower()
    if len(scheme) == 1 and os.name == "nt":  # C:\path
        scheme = ""
    base = scheme.split("+", 1)[0]
    if base not in BUILTIN_SCHEMES and scheme not in _plugin_schemes():
        raise _refuse(uri, f"no tracking store is known for the scheme {scheme!r}", hint)
    if base in ("http", "https") and not parsed.hostname:
        raise _refuse(uri, "it names no host", hint)
    if base == "sqlite" and not uri.lower().startswith("sqlite://"):
        raise _refuse(uri, "a SQLite store is written sqlite:///relative/path.db or sqlite:////absolute/path.db",
                      hint)
    if base in DB_SCHEMES and base != "sqlite" and not parsed.hostname and not parsed.path.strip("/"):
        raise _refuse(uri, "it names no database", hint)
    return base


def _headers() -> dict[str, str]:
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    if token:
        return {"Authorization": f"Bearer {token}"}
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user is not None and password is not None:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    return {}


@dataclass
class Answer:
    status: int
    body: dict


def _get(uri: str, path: str, query: dict[str, str], timeout: float = TIMEOUT_S) -> Answer:
    import http.client  # a server's question only: a SQLite store's `radt-ext run` starts without them
    import urllib.error
    import urllib.request

    url = f"{uri.rstrip('/')}/api/2.0/mlflow/{path}?{urllib.parse.urlencode(query)}"
    request = urllib.request.Request(url, headers=_headers())
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return Answer(resp.status, json.loads(resp.read() or b"{}"))
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            body = {}
        if exc.code in (401, 403):
            raise _refuse(uri, f"the server refused the credentials (HTTP {exc.code})",
                          "check MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD") from None
        return Answer(exc.code, body if isinstance(body, dict) else {})
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        why = str(getattr(exc, "reason", None) or exc or type(exc).__name__)
        raise _refuse(uri, f"the server does not answer ({why})", "start it or check MLFLOW_TRACKING_URI") from None


@dataclass
class Experiment:
    experiment_id: str
    deleted: bool


@dataclass
class Run:
    experiment_id: str
    status: str


class StoreProbe:
    """Answers about one store without MLflow; None wherever only MLflow can tell."""

    def __init__(self, uri: str):
        self.uri = uri
        self.scheme = check_uri(uri)
        self._db = fresh_store.sqlite_path(uri) if self.scheme == "sqlite" else None  # None: in memory too
        # a SQLite file still to be made, in a folder that exists: made alongside the workload (fresh_store.py)
        self.fresh = self._db is not None and not os.path.lexists(self._db) \
            and os.path.isdir(os.path.dirname(os.path.abspath(self._db)))
        # a server with TLS settings of its own, and any other store, are read through MLflow
        self.readable = (self.scheme in ("http", "https") and not any(os.environ.get(v) for v in TLS_SETTINGS)) \
            or (self._db is not None and os.path.isfile(self._db))

    # -- sqlite: MLflow's own tables, read-only ------------------------------------
    def _query(self, sql: str, args: tuple):
        try:
            conn = sqlite3.connect(f"file:{urllib.parse.quote(os.path.abspath(self._db))}?mode=ro", uri=True,
                                   timeout=TIMEOUT_S)
        except sqlite3.Error:
            return None
        try:
            return conn.execute(sql, args).fetchone() or ()
        except sqlite3.Error:  # not (yet) an MLflow store, or another schema: MLflow will tell
            return None
        finally:
            conn.close()

    # -- questions --------------------------------------------------------------------
    def experiment(self, name: str | None = None, experiment_id: str | None = None) -> Experiment | bool | None:
        """The experiment; False when the store has none by that name or id; None when unknown here."""
        if not self.readable:
            return None
        if self._db:
            row = self._query("SELECT experiment_id, lifecycle_stage FROM experiments WHERE "
                              + ("name = ?" if name is not None else "experiment_id = ?"),
                              (name if name is not None else experiment_id,))
            if row is None:
                return None
            return Experiment(str(row[0]), row[1] == "deleted") if row else False
        if name is not None:
            answer = _get(self.uri, "experiments/get-by-name", {"experiment_name": name})
        else:
            answer = _get(self.uri, "experiments/get", {"experiment_id": experiment_id})
        if answer.status == 200 and "experiment" in answer.body:
            exp = answer.body["experiment"]
            return Experiment(str(exp["experiment_id"]), exp.get("lifecycle_stage") == "deleted")
        if answer.body.get("error_code") in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            return False
        return None

    def run(self, run_id: str) -> Run | bool | None:
        """The run; False when the store does not hold it; None when unknown here."""
        if not self.readable:
            return None
        if self._db:
            row = self._query("SELECT experiment_id, status FROM runs WHERE run_uuid = ?", (run_id,))
            if row is None:
                return None
            return Run(str(row[0]), str(row[1])) if row else False
        answer = _get(self.uri, "runs/get", {"run_id": run_id})
        if answer.status == 200 and "run" in answer.body:
            info = answer.body["run"]["info"]
            return Run(str(info["experiment_id"]), str(info.get("status", "")))
        if answer.body.get("error_code") in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            return False
        return None

    def finished_with_tag(self, experiment: str, key: str, value: str) -> bool | None:
        """Whether the (active) experiment of that name holds an active FINISHED run tagged `key` = `value`
        (a sweep's variant done before); None when unknown here: only a SQLite file is read (a fresh
        store holds none)."""
        if self.fresh:
            return False
        if not self._db or not self.readable:
            return None
        row = self._query("SELECT 1 FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id "
                          "JOIN tags t ON t.run_uuid = r.run_uuid WHERE e.name = ? AND e.lifecycle_stage = 'active' "
                          "AND r.lifecycle_stage = 'active' AND r.status = 'FINISHED' AND t.key = ? AND t.value = ? "
                          "LIMIT 1", (experiment, key, value))
        return None if row is None else bool(row)
