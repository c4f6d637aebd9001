"""Whether a store that did not take spooled work is gone for good or down for now (`radt-ext sync`).

Gone (retrying can never help; sync sets the entry aside):
- a SQLite store whose file or folder no longer exists (a file store's folder too), told before connecting:
  MLflow would make a fresh, empty database in an existing folder;
- the run, or the experiment a spooled run was to be made in, does not exist or was deleted;
- a server answering 404.
Down (sync keeps the entry and tries again next time): a connection refused, a timeout, a server error
(HTTP 5xx), credentials refused (HTTP 401/403), and anything else it cannot place.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from radt_ext.store.writer import first_line

DELETED = "deleted"  # MLflow's lifecycle stage of a deleted run or experiment


@dataclass(frozen=True)
class Fate:
    gone: bool
    why: str  # one line: what kind of failure, and MLflow's or the system's words


def _local_path(uri: str) -> tuple[str, bool] | None:
    """(path, is a database file) of a store on this machine's disk; None for a server or a database server."""
    if uri.startswith("sqlite:"):
        path = uri[len("sqlite:///"):].partition("?")[0] if uri.startswith("sqlite:///") else ""
        return (os.path.abspath(path), True) if path and path != ":memory:" else None
    if uri.startswith("file:"):
        return os.path.abspath(unquote(urlparse(uri).path)), False
    if "://" not in uri and uri:
        return os.path.abspath(uri), False
    return None


def before_contact(uri: str, creates: bool = False) -> Fate | None:
    """Gone when the store's place on disk no longer exists; None when it does or is not on this disk.
    `creates`: the spool holds a run the store never saw, and a database file not made yet is no sign
    of a store gone (its folder still is)."""
    local = _local_path(uri)
    if local is None:
        return None
    path, is_file = local
    folder = os.path.dirname(path) if is_file else path
    if not os.path.isdir(folder):
        return Fate(True, f"its folder {folder} no longer exists")
    if is_file and not creates and not os.path.isfile(path):
        return Fate(True, f"its database file {path} no longer exists")
    return None


def of_run(client, run) -> Fate | None:
    """Gone when the run or its experiment was deleted."""
    if run.info.lifecycle_stage == DELETED:
        return Fate(True, f"run {run.info.run_id} was deleted")
    return of_experiment(client, run.info.experiment_id)


def of_experiment(client, experiment_id: str) -> Fate | None:
    """Gone when the experiment does not exist or was deleted (a store's refusal to say is of_error's)."""
    from mlflow.exceptions import MlflowException

    try:
        experiment = client.get_experiment(experiment_id)
    except MlflowException as exc:
        fate = of_error(exc)
        if fate.gone:
            return Fate(True, f"experiment {experiment_id} does not exist ({fate.why})")
        raise
    if experiment.lifecycle_stage == DELETED:
        return Fate(True, f"experiment {experiment_id} was deleted")
    return None


def of_error(exc: BaseException) -> Fate:
    from mlflow.exceptions import RestException

    text = first_line(exc)[:300]
    status = _http_status(exc)
    if status == 404:
        if getattr(exc, "error_code", None) == "RESOURCE_DOES_NOT_EXIST":
            return Fate(True, f"not in the store: {text}")
        return Fate(True, f"not found (HTTP 404): {text}")
    if status in (401, 403):
        return Fate(False, f"credentials refused (HTTP {status}; check MLFLOW_TRACKING_USERNAME and "
                           f"MLFLOW_TRACKING_PASSWORD): {text}")
    lowered = text.lower()
    if isinstance(exc, TimeoutError) or "timed out" in lowered or "timeout" in lowered:
        return Fate(False, f"timed out: {text}")
    if isinstance(exc, ConnectionError) or "connection refused" in lowered or "max retries exceeded" in lowered:
        return Fate(False, f"refused: {text}")
    if status is not None and status >= 500 and (isinstance(exc, RestException) or "api request" in lowered):
        return Fate(False, f"server error (HTTP {status}): {text}")
    return Fate(False, f"error: {text}")


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status MLflow's error stands for (its error code's, for a store that is no server too)."""
    from mlflow.exceptions import MlflowException

    if not isinstance(exc, MlflowException):
        return None
    try:
        return int(exc.get_http_status_code())
    except (TypeError, ValueError):
        return None
