"""The tracking store as the commands reach it: its URI, a client whose store answered, and the experiment
a run goes into (one that radt-ext makes is tagged as a training experiment)."""
from __future__ import annotations

import contextlib
import os

from radt_ext.errors import UsageError
from radt_ext.store import fresh_store, store_probe

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"  # MLflow's record of what an experiment is for
TRAINING_KIND = "custom_model_development"
CONNECT_TIMEOUT_S = 15.0  # a tracking server's first answer


def tracking_uri(explicit: str | None = None) -> str:
    if explicit:
        return explicit  # MLflow not imported: a sweep's first job starts before it is (head_start.py)
    import mlflow

    return mlflow.get_tracking_uri()


def unreachable(uri: str, timeout: float = 5.0) -> str | None:
    """Why an http(s) tracking server does not answer at all, in seconds rather than after MLflow's minutes
    of retries; None when something answers (any HTTP status) or the store is not a server."""
    if not uri.startswith(("http://", "https://")):
        return None
    import http.client
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # it answered; what it thinks of us the first real call says
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        return str(getattr(exc, "reason", None) or exc or type(exc).__name__)


FREEZE_HEAP = False  # set by the `radt-ext` command: MLflow's import and its first connection (quiet_heap)
_quieted: set[str] = set()


def connect(uri: str):
    """A client whose store answered once; a one-line UsageError when it does not."""
    store_probe.check_uri(uri)  # an unknown scheme or a malformed URI: one line, not MLflow's traceback
    down = unreachable(uri)
    if down:
        raise UsageError(f"cannot use the tracking store {uri}: the server does not answer ({down}); "
                         "start it or check MLFLOW_TRACKING_URI")
    try:
        with quiet_heap("connect"):
            from mlflow.tracking import MlflowClient

            if fresh_store.not_made(uri):  # from the kept tables: not seconds of MLflow's migrations
                fresh_store.make(uri)

            from radt_ext.store.writer import call_with_deadline

            client = MlflowClient(tracking_uri=uri)
            if uri.startswith(("http://", "https://")):  # a server that dies now: not MLflow's minutes of retries
                call_with_deadline(lambda: client.search_experiments(max_results=1), CONNECT_TIMEOUT_S)
            else:
                client.search_experiments(max_results=1)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = "check MLFLOW_TRACKING_URI"
        if "401" in first or "403" in first or "credential" in first.lower() or "unauthorized" in first.lower():
            hint = "check MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
        raise UsageError(f"cannot use the tracking store {uri}: {first[:300]}; {hint}") from None
    return client


@contextlib.contextmanager
def quiet_heap(step: str):
    """In the `radt-ext` command, once per `step` (MLflow's import, the first connection and the store's
    engine): no cycle collection meanwhile, and what it made frozen out of the collector's sight after (its
    full passes over that heap grew to 0.17 s each, most during MLflow's import beside a job's start, one at
    any moment after: docs/validation/overhead_plain/gc_pauses/)."""
    if not FREEZE_HEAP or step in _quieted:
        yield
        return
    import gc

    _quieted.add(step)
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was:
            gc.enable()


def experiment_choice(name: str | None) -> tuple[str | None, str | None]:
    """(name, id): the experiment a run goes to, as MLflow picks it: the name given, else
    MLFLOW_EXPERIMENT_ID (then the id), else MLFLOW_EXPERIMENT_NAME; (None, None): the default one."""
    if name is not None:
        return name, None
    env_id = os.environ.get("MLFLOW_EXPERIMENT_ID") or None
    return (None, env_id) if env_id else (os.environ.get("MLFLOW_EXPERIMENT_NAME"), None)


def _not_in_store(env_id: str) -> UsageError:
    return UsageError(f"experiment {env_id!r} (from MLFLOW_EXPERIMENT_ID) is not in this store; "
                      "unset MLFLOW_EXPERIMENT_ID or pass --experiment-name")


def _deleted(name: str) -> UsageError:
    return UsageError(f"experiment {name!r} is deleted; restore it or choose another --experiment-name")


def experiment_id_for(client, name: str | None) -> str:
    """The experiment's id; one that radt-ext makes is tagged as a training experiment."""
    from mlflow.exceptions import MlflowException

    name, env_id = experiment_choice(name)
    if env_id:
        try:
            client.get_experiment(env_id)
        except MlflowException:
            raise _not_in_store(env_id) from None
        return env_id
    if name is None:
        return "0"
    return named_experiment_id(client, name)


def named_experiment_id(client, name: str) -> str:
    """The id of the experiment of that name, made (tagged as a training experiment) when missing."""
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return client.create_experiment(name, tags={EXPERIMENT_KIND_TAG: TRAINING_KIND})
        except MlflowException:  # made meanwhile by another process
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    if experiment.lifecycle_stage == "deleted":
        raise _deleted(name)
    return experiment.experiment_id


def runs_by_id(client, run_ids) -> list:
    """The runs with these ids, in the order given; a one-line UsageError for an id the store lacks."""
    from mlflow.exceptions import MlflowException

    runs = []
    for run_id in run_ids:
        try:
            runs.append(client.get_run(run_id))
        except MlflowException:
            raise UsageError(f"run {run_id!r} is not in this tracking store; check the id "
                             "(or MLFLOW_TRACKING_URI)") from None
    return runs
