"""A SQLite tracking store that does not exist yet, made whole or not at all.

MLflow makes a new SQLite store by running its schema migrations on the file in place (seconds). A
process stopped half-way would leave a file that is neither empty nor a store, and a workload opening the
store meanwhile would run the same migrations on it at once. So the store is made in a temporary file
beside it and linked into place when complete: the store's path shows nothing or the whole store. A store
that appeared meanwhile (the workload's own MLflow made it) is kept, once its migrations have reached the
same version, and the temporary file goes.

Running the migrations takes seconds; their result is the same file for every store of one MLflow. So the
first store made keeps a copy of its tables, without the Default experiment, in the user's cache
(`$XDG_CACHE_HOME/radt-ext/stores`, one per MLflow version), and later stores start from that copy: MLflow
opens it, checks its schema is at the head of its migrations and adds the Default experiment as it does for
a new store. A copy MLflow refuses is set aside and the store made by the migrations instead.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
import urllib.parse

SETTLE_S = 60.0  # for a store another process is making: its migrations done


def sqlite_path(uri: str) -> str | None:
    """The file of a `sqlite:///` URI; None for another store or an in-memory one."""
    if not uri.lower().startswith("sqlite:"):
        return None
    path = urllib.parse.urlparse(uri).path
    path = (path[1:] if path.startswith("/") else path).split("?", 1)[0]
    return None if path in ("", ":memory:") else path


def not_made(uri: str) -> bool:
    """A `sqlite:///` store whose file does not exist yet (a dry run reads none and makes none)."""
    path = sqlite_path(uri)
    return path is not None and not os.path.exists(path)


def _making(path: str) -> str:
    """This process's temporary file for the store at `path`."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.{os.getpid()}.making")


def _version(path: str) -> str | None:
    try:
        conn = sqlite3.connect(f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro", uri=True, timeout=1)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return row[0] if row else None
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _head() -> str | None:
    """The schema version MLflow's migrations end at."""
    try:
        from alembic.script import ScriptDirectory
        from mlflow.store.db.utils import _get_alembic_config

        return ScriptDirectory.from_config(_get_alembic_config("sqlite://")).get_current_head()
    except Exception:
        return None


STALLED_S = 15.0  # another process's migrations that made no step for this long: it died making the store


def _settle(path: str, head: str | None, settle: float) -> None:
    """Wait (at most `settle` s) for another process's migrations of the store at `path` to reach `head`,
    unless they stall (that process was stopped half-way: MLflow then says what is wrong with the file)."""
    deadline = time.monotonic() + settle
    last, changed = None, time.monotonic()
    while head is not None and time.monotonic() < deadline:
        version = _version(path)
        if version == head:
            return
        if version != last:
            last, changed = version, time.monotonic()
        elif time.monotonic() - changed > STALLED_S:
            return
        time.sleep(0.2)


def _template() -> str:
    """Where the tables of a new store for this MLflow are kept."""
    from mlflow.version import VERSION

    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "radt-ext", "stores", f"mlflow-{VERSION}.db")


def _open(tmp: str) -> None:
    """MLflow's own opening of the store at `tmp`: its migrations on an empty file, its schema check and its
    Default experiment on a copied one. Every connection closed after: the file holds the whole store."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service.utils import _get_sqlalchemy_store  # MLflow's own choice of store

    uri = f"sqlite:///{os.path.abspath(tmp)}"
    try:
        _get_sqlalchemy_store(uri, None)
    finally:  # MLflow keeps an engine per URI: this one's file is renamed or gone next
        engine = SqlAlchemyStore._engine_map.pop(uri, None)
        if engine is not None:
            engine.dispose()


def _from_template(tmp: str) -> bool:
    """The store at `tmp` opened from the kept tables; False (and `tmp` gone) where there are none or MLflow
    refuses them."""
    template = _template()
    try:
        shutil.copyfile(template, tmp)
    except OSError:
        return False
    try:
        _open(tmp)
        return True
    except Exception:
        _remove(tmp, f"{tmp}-journal", template)
        return False


def _keep_template(tmp: str) -> None:
    """Keep the tables of the store just made at `tmp` for the next one (best effort: a cache)."""
    template = _template()
    part = f"{template}.{os.getpid()}.making"
    try:
        os.makedirs(os.path.dirname(template), exist_ok=True)
        shutil.copyfile(tmp, part)
        conn = sqlite3.connect(part)
        try:
            with conn:
                conn.execute("DELETE FROM experiments")  # MLflow adds its Default experiment on opening
        finally:
            conn.close()
        os.replace(part, template)
    except (OSError, sqlite3.Error):
        _remove(part)


def make(uri: str, settle: float = SETTLE_S) -> bool:
    """Make the SQLite store at `uri` (whose file did not exist when radt-ext looked); True when this call
    made it. When another process made it meanwhile, wait (at most `settle` s) for its migrations."""
    path = sqlite_path(uri)
    if path is None:
        return False
    if os.path.lexists(path):  # the workload's own MLflow is making it
        _settle(path, _head(), settle)
        return False
    tmp = _making(path)
    try:
        if not _from_template(tmp):
            _open(tmp)
            _keep_template(tmp)
        head = _version(tmp)
        try:
            os.link(tmp, path)  # never over a store that appeared meanwhile
            return True
        except FileExistsError:
            pass
    finally:
        discard(uri)
    _settle(path, head, settle)
    return False


def discard(uri: str) -> None:
    """Remove this process's half-made store beside `uri` (a stop that does not wait for `make`)."""
    path = sqlite_path(uri)
    if path is None:
        return
    tmp = _making(path)
    _remove(tmp, f"{tmp}-journal")


def _remove(*paths: str) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
