"""One writer per run: batches metric points into `log_batch` calls from one thread.

Every point keeps the timestamp of the moment it was read. Step = whole
milliseconds since the session's t0 (for a collocation group, the group's common
start), so runs of one group line up on both MLflow's step and relative-time axes.

When the tracking store refuses a batch after a few retries (server gone,
SQLite locked for too long), the batch is appended to a spool file instead;
`radt-ext sync` replays spool files later. Nothing is dropped silently: `sent`,
`stored` and `spooled` count points.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities import Metric

log = logging.getLogger(__name__)

MAX_BATCH = 1000  # MLflow's limit of metrics per log_batch call
ENV_SPOOL_DIR = "RADT_EXT_SPOOL_DIR"


def spool_dir() -> Path:
    return Path(os.environ.get(ENV_SPOOL_DIR) or Path.home() / ".radt-ext" / "spool")


@dataclass
class Point:
    key: str
    value: float
    timestamp: int  # ms since the epoch
    step: int

    def metric(self) -> Metric:
        return Metric(self.key, self.value, self.timestamp, self.step)


class SpoolError(Exception):
    """The spool file could not be written; the message is one line for users."""


class MetricWriter:
    def __init__(
        self,
        client,
        run_id: str,
        tracking_uri: str,
        flush_interval: float = 1.0,
        retries: int = 3,
        spool_path: Path | None = None,
    ):
        self.client = client
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self.flush_interval = flush_interval
        self.retries = retries
        self.spool_path = spool_path or spool_dir() / f"{run_id}.jsonl"
        self.sent = 0
        self.stored = 0
        self.spooled = 0
        self.errors: list[str] = []
        self._queue: queue.SimpleQueue[Point] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"radt-writer-{run_id[:8]}", daemon=True)

    def start(self) -> "MetricWriter":
        self._thread.start()
        return self

    def add(self, key: str, value: float, timestamp_ms: int, step: int) -> None:
        self.sent += 1
        self._queue.put(Point(key, float(value), int(timestamp_ms), int(step)))

    def close(self, timeout: float = 60.0) -> None:
        """Flush everything queued and stop the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._drain()  # anything added after the thread's last pass

    def _loop(self) -> None:
        while not self._stop.wait(self.flush_interval):
            self._drain()
        self._drain()

    def _drain(self) -> None:
        batch: list[Point] = []
        while True:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
            if len(batch) == MAX_BATCH:
                self._write(batch)
                batch = []
        if batch:
            self._write(batch)

    def _write(self, batch: list[Point]) -> None:
        delay = 0.2
        for attempt in range(self.retries + 1):
            try:
                self.client.log_batch(self.run_id, metrics=[p.metric() for p in batch], synchronous=True)
                self.stored += len(batch)
                return
            except Exception as exc:  # store or network failure: retry, then spool
                last = exc
                if attempt < self.retries:
                    time.sleep(delay)
                    delay *= 2
        message = f"{type(last).__name__}: {last}".splitlines()[0]
        log.warning("tracking store refused %d points (%s); spooling to %s", len(batch), message, self.spool_path)
        self.errors.append(message)
        self._spool(batch)

    def _spool(self, batch: list[Point]) -> None:
        try:
            self.spool_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.spool_path, "a") as fh:
                for p in batch:
                    fh.write(json.dumps({
                        "tracking_uri": self.tracking_uri, "run_id": self.run_id,
                        "key": p.key, "value": p.value, "timestamp": p.timestamp, "step": p.step,
                    }) + "\n")
            self.spooled += len(batch)
        except OSError as exc:
            message = f"cannot write spool file {self.spool_path}: {exc.strerror or exc}; " \
                      f"set {ENV_SPOOL_DIR} to a writable directory"
            self.errors.append(message)
            log.error("%s (%d points lost)", message, len(batch))
