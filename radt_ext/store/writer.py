"""One writer per run: batches metric points into the store from one thread.

Into a SQLite or PostgreSQL store it inserts directly into MLflow's tables (bulk_metrics.py, the same rows
`log_batch` stores, 10 000 points a transaction); anywhere else, or if that path fails, through
`log_batch`, 1000 points a call.

Every point keeps the timestamp of the moment it was read. Step = whole
milliseconds since the session's t0 (for a collocation group, the group's common
start), so runs of one group line up on both MLflow's step and relative-time axes.

Faults, and what the writer does about them:
- SQLite says "database is locked" (several runs writing one file): retry with
  jittered backoff for up to `lock_patience` seconds; nothing is spooled for that. The first waits
  are short (10 ms, doubling to 0.5 s): a lock another writer holds for one batch is gone within
  milliseconds, and many waiting processes still spread out.
- The store refuses a batch after a few retries (server gone): the batch goes to a
  spool file and the writer enters outage mode: later batches go straight to the
  spool until a cheap probe (`/health` for a server) answers again, so the run is
  never slowed by MLflow's own minutes-long HTTP retries.
- A call that hangs past `close()`'s deadline: its batch is spooled too; `radt-ext
  sync` skips points already stored, so a batch that landed after all is not doubled.
- The end of the run (summary metrics, tags, status) goes through `end_run`, which
  spools it in the same way; sync applies it after the points.
- The spool cannot be written: one error line, the count of points lost, and the
  workload carries on.
Nothing is dropped silently: `sent`, `stored`, `spooled` and `lost` count points.

A writer made before its run exists (`radt-ext run` starts the workload while the run is being created)
holds its points until `bind()` names the run.
"""
from __future__ import annotations

import http.client
import json
import logging
import os
import queue
import random
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAX_BATCH = 1000  # MLflow's limit of metrics per log_batch call
BULK_BATCH = 10_000  # points per transaction on the direct path: fewer commits (each an fsync in SQLite)
MAX_TAGS = 100  # MLflow's limit of tags per log_batch call
# A flush costs about the same CPU whatever its size (a thread woken from sleep, one commit), so it
# comes every few seconds; the first comes after one, so a run shows its first points at once.
FLUSH_EVERY_S = 5.0
FIRST_FLUSH_S = 1.0
ENV_SPOOL_DIR = "RADT_EXT_SPOOL_DIR"
LOCKED = ("database is locked", "database table is locked", "database is busy")
LOCK_WAIT_FIRST_S, LOCK_WAIT_MAX_S = 0.01, 0.5
LOCK_WAITS: deque[float] = deque(maxlen=10000)  # this process's waits for a locked store, s (RADT_EXT_TIMINGS)


def lock_wait(retry: int) -> None:
    """Sleep before the `retry`-th try (0-based) of a write SQLite refused as locked: jittered, doubling."""
    seconds = min(LOCK_WAIT_MAX_S, LOCK_WAIT_FIRST_S * 2 ** min(retry, 16)) * random.uniform(0.5, 1.5)
    LOCK_WAITS.append(seconds)
    time.sleep(seconds)


def spool_dir() -> Path:
    return Path(os.environ.get(ENV_SPOOL_DIR) or Path.home() / ".radt-ext" / "spool")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def absolute_uri(uri: str) -> str:
    """sqlite:///mlflow.db is relative to the cwd; a spool file must name the store wherever sync runs."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        path, sep, query = uri[len("sqlite:///"):].partition("?")
        if path and path != ":memory:":
            return "sqlite:///" + os.path.abspath(path) + sep + query
    return uri


def is_locked(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(words in text for words in LOCKED)


def batches(metrics: list, tags: list) -> Iterator[tuple[list, list]]:
    """(metrics, tags) for as few log_batch calls as MLflow's limits allow (each is a commit): the tags with
    the first metrics."""
    while metrics or tags:
        some_tags, tags = tags[:MAX_TAGS], tags[MAX_TAGS:]
        room = MAX_BATCH - len(some_tags)
        some, metrics = metrics[:room], metrics[room:]
        yield some, some_tags


@dataclass
class Point:
    key: str
    value: float
    timestamp: int  # ms since the epoch
    step: int

    def metric(self):
        from mlflow.entities import Metric

        return Metric(self.key, self.value, self.timestamp, self.step)


class SpoolError(Exception):
    """The spool file could not be written; the message is one line for users."""


def call_with_deadline(fn, timeout: float):
    """fn() in a helper thread; TimeoutError when it takes longer than timeout (the thread is left to
    MLflow's retries, a daemon that does not keep the process alive)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="radt-store-call")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"the store did not answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class MetricWriter:
    def __init__(
        self,
        client,
        run_id: str | None,
        tracking_uri: str,
        flush_interval: float = FLUSH_EVERY_S,
        retries: int = 3,
        spool_path: Path | None = None,
        lock_patience: float = 120.0,
        close_timeout: float = 30.0,
        call_timeout: float = 15.0,
        bulk: bool = True,
    ):
        self.client = client
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self.flush_interval = flush_interval
        self.retries = retries
        self.lock_patience = lock_patience
        self.close_timeout = close_timeout
        self.call_timeout = call_timeout  # MLflow's own HTTP retries take minutes on a dead server
        self._http = tracking_uri.startswith(("http://", "https://"))
        self._spool_uri = absolute_uri(tracking_uri)
        self._spool_path = spool_path
        self._bound = threading.Event()  # the run exists and the store is reached: points may go out
        if run_id is not None and client is not None:
            self._bound.set()
        self.sent = 0
        self.stored = 0
        self.spooled = 0
        self.lost = 0
        self.lock_retries = 0  # log_batch calls repeated because SQLite was locked
        self.errors: list[str] = []
        self.down = False  # outage mode: the store refused; spool until a probe answers
        self._queue: queue.SimpleQueue[Point] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._inflight: list[Point] | None = None
        self._abandoned = False  # close() gave up waiting for the thread
        self._spool_failed = False
        self._bulk = None  # a BulkMetricInserter once opened
        self._bulk_wanted = bulk and not self._http  # opened on first use, in the writer's thread
        self._spool_only = False  # bound to the spool: the store is not tried (bind_to_spool)
        self._thread = threading.Thread(target=self._loop, name=f"radt-writer-{(run_id or 'unbound')[:8]}",
                                        daemon=True)

    @property
    def spool_path(self) -> Path:
        return self._spool_path or spool_dir() / f"{self.run_id}.jsonl"

    # -- public ---------------------------------------------------------------------
    def bind(self, client, run_id: str) -> "MetricWriter":
        """The run now exists: the points held so far go out with the next flush."""
        self.client, self.run_id = client, run_id
        self._bound.set()
        return self

    def bind_to_spool(self, run_id: str, made: dict | None = None) -> "MetricWriter":
        """The store could not be opened for this run: everything goes to the spool, the points held so
        far first. `made` describes a run still to be made ({experiment_id, run_name, start_time, tags,
        params}); `radt-ext sync` makes it, once, and replays the rest into it."""
        self.run_id, self._spool_only, self.down = run_id, True, True
        if made is not None:
            self._append([{"tracking_uri": self._spool_uri, "run_id": run_id, "kind": "run", **made}], what="the run")
        self._bound.set()
        return self

    def start(self) -> "MetricWriter":
        self._thread.start()
        return self

    def add(self, key: str, value: float, timestamp_ms: int, step: int) -> None:
        self.sent += 1
        self._queue.put(Point(key, float(value), int(timestamp_ms), int(step)))

    def close(self, timeout: float | None = None) -> None:
        """Flush everything queued and stop the thread; spool what cannot be confirmed in time."""
        self._stop.set()
        if not self._bound.is_set():  # the run was never made: nothing can take the points
            self.lost += len(self._take_all())
            return
        if self._thread.is_alive():
            self._thread.join(self.close_timeout if timeout is None else timeout)
        with self._lock:
            stuck = self._thread.is_alive()
            if stuck:
                self._abandoned = True
                pending = list(self._inflight or [])
        if stuck:  # a call hangs: its batch and the rest go to the spool (sync skips what landed)
            self._enter_outage("a call to the store did not return in time")
            pending.extend(self._take_all())
            if pending:
                self._spool_points(pending)
        else:
            self._drain()  # anything added after the thread's last pass

    def end_run(self, metrics: list, tags: dict[str, str], status: str | None,
                end_time: int | None = None, timeout: float | None = None) -> bool:
        """Log the run's last metrics (MLflow's Metric or Point) and tags and set its status (None: leave
        it); spool them when the store is away, or (`timeout` given) does not take them within `timeout` s
        on any store.

        Returns True when the store took them, False when they were spooled (or lost).
        """
        end_time = end_time or int(time.time() * 1000)
        if self._probe():  # a dead server fails here at once, not after MLflow's retries
            try:
                store = lambda: self._store_end(metrics, tags, status, end_time)  # noqa: E731
                if timeout is None:
                    self._bounded(store, self.close_timeout)
                else:
                    call_with_deadline(store, timeout)
                return True
            except Exception as exc:
                self.errors.append(first_line(exc))
                self._enter_outage(first_line(exc))
        records = [self._metric_record(Point(m.key, m.value, m.timestamp, m.step)) for m in metrics]
        records += [{"tracking_uri": self._spool_uri, "run_id": self.run_id, "kind": "tag",
                     "key": k, "value": str(v)} for k, v in tags.items()]
        if status:
            records.append({"tracking_uri": self._spool_uri, "run_id": self.run_id, "kind": "status",
                            "status": status, "end_time": end_time})
        self._append(records, what=f"the run's end ({len(metrics)} metrics, {len(tags)} tags, status {status})")
        return False

    # -- the thread -----------------------------------------------------------------
    def _loop(self) -> None:
        while not self._bound.wait(0.05):  # the run is being created: points wait in the queue
            if self._stop.is_set():
                return
        wait = min(FIRST_FLUSH_S, self.flush_interval)
        while not self._stop.wait(wait):
            self._drain()
            wait = self.flush_interval
        self._drain()

    def _take_all(self) -> list[Point]:
        out = []
        while True:
            try:
                out.append(self._queue.get_nowait())
            except queue.Empty:
                return out

    def _drain(self) -> None:
        batch: list[Point] = []
        limit = BULK_BATCH if self._bulk_wanted or self._bulk else MAX_BATCH
        while True:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
            if len(batch) >= limit:
                self._write(batch)
                batch = []
        if batch:
            self._write(batch)

    def _write(self, batch: list[Point]) -> None:
        if self.down and not self._probe():
            self._spool_points(batch)
            return
        with self._lock:
            if self._abandoned:
                self._spool_points(batch)
                return
            self._inflight = batch
        try:
            error = self._store_batch(batch)
        finally:
            with self._lock:
                self._inflight = None
                abandoned = self._abandoned
        if error is None:
            if not abandoned:  # else close() already spooled (and counted) this batch
                self.stored += len(batch)
            if self.down:
                self.down = False
                log.warning("radt-ext: tracking store %s answers again; storing points directly "
                            "(%d spooled meanwhile in %s)", self.tracking_uri, self.spooled, self.spool_path)
            return
        self.errors.append(error)
        if not abandoned:
            self._enter_outage(error)
            self._spool_points(batch)

    def _bulk_inserter(self):
        try:  # imported here: it uses MLflow internals, and without them log_batch still works
            from radt_ext.store.bulk_metrics import BulkMetricInserter

            return BulkMetricInserter.for_client(self.client, self.run_id)
        except Exception as exc:  # no such internals, or the store cannot be opened: log_batch will say why
            log.debug("radt-ext: no bulk metric path: %s", first_line(exc))
            return None

    def _store_points(self, batch: list[Point]) -> None:
        if self._bulk_wanted:
            self._bulk_wanted = False
            self._bulk = self._bulk_inserter()
        if self._bulk is not None:
            try:
                return self._bulk.insert(batch)
            except Exception as exc:
                if is_locked(exc):
                    raise
                log.warning("radt-ext: direct insert into %s failed (%s); using MLflow's log_batch from now on",
                            self.tracking_uri, first_line(exc))
                self._bulk = None
        for i in range(0, len(batch), MAX_BATCH):
            self.client.log_batch(self.run_id, metrics=[p.metric() for p in batch[i:i + MAX_BATCH]],
                                  synchronous=True)

    def _store_batch(self, batch: list[Point]) -> str | None:
        """None when stored, else the last error's first line."""
        delay = 0.2
        attempt = locked = 0
        locked_since = None
        while True:
            try:
                self._bounded(lambda: self._store_points(batch), self.call_timeout)  # a lock: waited out below
                return None
            except TimeoutError as exc:  # hung: spool now; sync skips the batch if it lands after all
                return first_line(exc)
            except Exception as exc:
                if is_locked(exc):
                    # another writer holds the SQLite file: wait it out, a lock is not an outage
                    locked_since = locked_since or time.monotonic()
                    if time.monotonic() - locked_since < self.lock_patience:
                        lock_wait(locked)
                        locked += 1
                        self.lock_retries += 1
                        continue
                attempt += 1
                if attempt > self.retries:
                    return first_line(exc)
                time.sleep(delay)
                delay *= 2

    def call(self, fn, timeout: float):
        """fn(), which reaches the store through MLflow's client: as it is on a database store; on a
        tracking server not tried when the server does not answer and cut short after `timeout`
        (TimeoutError both ways), since MLflow's HTTP retries take minutes to give up on a dead one."""
        if self._spool_only:
            raise TimeoutError("the store was not reached; the run is in the spool")
        if not self._http:
            return fn()
        if not self._probe():
            raise TimeoutError("the server does not answer")
        return call_with_deadline(fn, timeout)

    def _bounded(self, fn, timeout: float):
        """fn(), cut short after `timeout` on a tracking server (a database store's lock is waited out)."""
        return call_with_deadline(fn, timeout) if self._http else fn()

    # -- outage -----------------------------------------------------------------------

    def _enter_outage(self, reason: str) -> None:
        if not self.down:
            self.down = True
            log.warning("radt-ext: tracking store %s refused points (%s); spooling to %s until it answers "
                        "(replay later with `radt-ext sync`)", self.tracking_uri, reason, self.spool_path)

    def _probe(self) -> bool:
        """Cheap check that the store answers again (no MLflow retries)."""
        if self._spool_only:
            return False
        uri = self.tracking_uri
        if uri.startswith(("http://", "https://")):
            try:
                with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=2) as resp:
                    return resp.status == 200
            except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):  # no HTTP answer
                return False
        return True  # a database store: the next log_batch is the probe

    def _store_end(self, metrics: list, tags: dict[str, str], status: str, end_time: int) -> None:
        from mlflow.entities import Metric, RunTag

        metrics = [Metric(m.key, float(m.value), int(m.timestamp), int(m.step)) for m in metrics]
        for some, some_tags in batches(metrics, [RunTag(k, str(v)) for k, v in tags.items()]):
            self._retry_locked(lambda: self.client.log_batch(self.run_id, metrics=some, tags=some_tags,
                                                             synchronous=True))
        if status:
            self._retry_locked(lambda: self.client.set_terminated(self.run_id, status, end_time))

    def _retry_locked(self, fn) -> None:
        start = time.monotonic()
        locked = 0
        while True:
            try:
                return fn()
            except Exception as exc:
                if not is_locked(exc) or time.monotonic() - start > self.lock_patience:
                    raise
                lock_wait(locked)
                locked += 1
                self.lock_retries += 1

    # -- spool --------------------------------------------------------------------------
    def _metric_record(self, p: Point) -> dict:
        return {"tracking_uri": self._spool_uri, "run_id": self.run_id,
                "key": p.key, "value": p.value, "timestamp": p.timestamp, "step": p.step}

    def _spool_points(self, batch: list[Point]) -> None:
        if self._append([self._metric_record(p) for p in batch], what=f"{len(batch)} points"):
            self.spooled += len(batch)
        else:
            self.lost += len(batch)

    def _append(self, records: list[dict], what: str) -> bool:
        size = None
        try:
            self.spool_path.parent.mkdir(parents=True, exist_ok=True)
            text = "".join(json.dumps(r) + "\n" for r in records)
            with open(self.spool_path, "a") as fh:
                size = fh.tell()
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            return True
        except OSError as exc:
            if size is not None:  # disk full half-way: no half-written records left behind
                try:
                    os.truncate(self.spool_path, size)
                except OSError:
                    pass
            message = (f"cannot write spool file {self.spool_path}: {exc.strerror or exc}; "
                       f"points are being lost; set {ENV_SPOOL_DIR} to a writable directory with free space")
            if not self._spool_failed:  # one line, not one per batch
                self._spool_failed = True
                self.errors.append(message)
                log.error("radt-ext: %s", message)
            log.debug("lost %s", what)
            return False
