"""Shared test set-up: the `gpu` marker, a HOME of the test's own, a fresh SQLite MLflow store per test, and
which tests may run beside each other on pytest-xdist's two workers."""
from __future__ import annotations

import fcntl
import os
import shutil
import site
import sys
import tempfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL_HOME = os.path.expanduser("~")  # before the session's own HOME replaces it
# What radt-ext writes under HOME by default (the spool, the timeline files a run's end could not store)
# goes to a folder of each test's own instead, and child processes inherit it. Caches (matplotlib's fonts,
# torch's) go to one folder for the session, so they are built once, not once per test.
_SESSION: dict = {}


def _home_vars(home: str, cache: str) -> dict[str, str]:
    return {"HOME": home, "RADT_EXT_SPOOL_DIR": os.path.join(home, ".radt-ext", "spool"),
            "XDG_CONFIG_HOME": os.path.join(home, ".config"), "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
            "XDG_STATE_HOME": os.path.join(home, ".local", "state"), "XDG_CACHE_HOME": cache}


def _tool_roots() -> dict[str, str]:
    """Tools the tests only read from that live under the real HOME (pyenv's Pythons behind its shims,
    packages installed with --user): pinned there, so a child process still finds them."""
    roots = {}
    pyenv = os.path.join(REAL_HOME, ".pyenv")
    if "PYENV_ROOT" not in os.environ and os.path.isdir(pyenv):
        roots["PYENV_ROOT"] = pyenv
    if "PYTHONUSERBASE" not in os.environ and site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        roots["PYTHONUSERBASE"] = site.getuserbase()
    return roots


def pytest_configure(config):
    """The session's HOME, set before any test module is imported or a session fixture runs."""
    root = tempfile.mkdtemp(prefix="radt-ext-test-home-")
    changes = {**_tool_roots(), **_home_vars(os.path.join(root, "home"), os.path.join(root, "cache"))}
    _SESSION.update(root=root, saved={k: os.environ.get(k) for k in changes})
    os.makedirs(changes["HOME"])
    os.environ.update(changes)


def pytest_unconfigure(config):
    for key, value in _SESSION.pop("saved", {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if "root" in _SESSION:
        shutil.rmtree(_SESSION.pop("root"), ignore_errors=True)


@pytest.fixture(autouse=True)
def alone_or_beside(request, tmp_path_factory):
    """Under pytest-xdist's two workers: a test marked `alone` runs with no test beside it, the others beside
    each other, but never two with the stand-in MPS daemon (each would see the other's daemon serving its
    GPU). Locks the workers share: `beside` taken shared, or exclusive by an `alone` test, with a turnstile
    in front so that an `alone` test waiting holds back the other worker's next test; `mps` exclusive."""
    worker = getattr(request.config, "workerinput", None)
    if worker is None:  # one process (-n0): nothing runs beside anything
        yield
        return
    locks = tmp_path_factory.getbasetemp().parent  # the run's folder, shared by its workers
    alone = request.node.get_closest_marker("alone") is not None
    with open(locks / "turnstile.lock", "a") as turnstile, open(locks / "beside.lock", "a") as beside, \
            open(locks / "mps.lock", "a") as mps:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if alone:
            fcntl.flock(beside, fcntl.LOCK_EX)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        else:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(beside, fcntl.LOCK_SH)
        if "standins" in request.fixturenames:
            fcntl.flock(mps, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(mps, fcntl.LOCK_UN)
            fcntl.flock(beside, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def own_home(tmp_path_factory, monkeypatch):
    """Every test: a HOME, and RADT_EXT_SPOOL_DIR under it, of its own."""
    home = tmp_path_factory.mktemp("home")
    for key, value in _home_vars(str(home), os.environ["XDG_CACHE_HOME"]).items():
        monkeypatch.setenv(key, value)
    return home


def _gpu_reason() -> str | None:
    """None when an NVIDIA GPU answers through NVML, else why not."""
    if os.environ.get("RADT_EXT_NVML_REPLAY"):
        return "RADT_EXT_NVML_REPLAY is set: the real GPU path is not under test"
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            if pynvml.nvmlDeviceGetCount() == 0:
                return "NVML found no GPU"
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:
        return f"no NVIDIA GPU here ({type(exc).__name__}: {exc})".splitlines()[0]
    return None


ALONE_TIMEOUT_S = 1200  # an `alone` test's wait for the other worker's test counts in its timeout


def _timeout_s(item) -> float | None:
    mark = item.get_closest_marker("timeout")
    if mark is None:
        return None
    return float(mark.args[0] if mark.args else mark.kwargs.get("timeout", 0))


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if item.get_closest_marker("alone") is not None and (_timeout_s(item) or 0) < ALONE_TIMEOUT_S:
            item.add_marker(pytest.mark.timeout(ALONE_TIMEOUT_S), append=False)  # the closest: before the file's
        if "gpu" in item.keywords:
            if reason is None:
                reason = _gpu_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def tracking_uri(tmp_path, monkeypatch, request):
    """A real SQLite MLflow store of the test's own, made as radt-ext makes a new store (from the tables
    MLflow's migrations made once this session), with its Default experiment's artifacts under tmp_path;
    MLFLOW_* variables cleared. A test marked `new_store` gets only the URI: no file there yet."""
    for var in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "RADT_EXT_ACTIVE",
                "RADT_EXT_PROGRESS_FILE", "RADT_EXT_RUN_ID_FILE"):
        monkeypatch.setenv(var, "")  # recorded, so a value MLflow sets later (set_experiment) is undone too
        monkeypatch.delenv(var)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("RADT_EXT_SPOOL_DIR", str(tmp_path / "spool"))
    if request.node.get_closest_marker("new_store") is None:
        from radt_ext.store import fresh_store

        with monkeypatch.context() as here:
            here.chdir(tmp_path)
            fresh_store.make(uri)
    import mlflow

    mlflow.set_tracking_uri(uri)
    yield uri
    while mlflow.active_run():
        mlflow.end_run()


@pytest.fixture
def two_gpus(monkeypatch, tracking_uri):
    """tracking_uri, with NVML replayed from the trace recorded on two H100s (tests/traces.py)."""
    from listeners import nvml_backend
    from tests.traces import TWO_GPUS

    monkeypatch.setenv(nvml_backend.REPLAY_ENV, TWO_GPUS)
    nvml_backend.reset()
    yield tracking_uri
    nvml_backend.reset()


@pytest.fixture
def python_exe():
    return sys.executable
