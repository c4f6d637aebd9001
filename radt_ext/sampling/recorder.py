"""Recorder: listeners -> monitor -> (summaries; point filter -> timeline artifact and, shaped, writer) for
one MLflow run.

Used in-process by `radt-ext run` (the workload is a child process) and inside
the separate monitor process that `radt_ext.track()` starts.
"""
from __future__ import annotations

import re
import time
from array import array

from listeners.base import Listener, Reading
from radt_ext.sampling.selection import select_listeners  # noqa: F401 -- where its callers have found it
from radt_ext.sampling.monitor import Monitor
from radt_ext.figures.summaries import Summaries
from radt_ext.store.run_points import RunPoints, full_rate_default
from radt_ext.store.writer import MetricWriter

PREFIX = "system/"


class Recorder:
    def __init__(self, client, run_id: str | None, tracking_uri: str, listeners: list[Listener], t0: float | None = None,
                 keep: re.Pattern | None = None, workload_runs=None, full_rate: bool | None = None,
                 spill_dir: str | None = None):
        self.t0 = time.time() if t0 is None else t0
        self.until: float | None = None  # set: the figures end here (the workload's exit), not at stop()
        self.keep = keep  # metric names whose (t, value) series stay in memory (collocation's energy split)
        self._kept: dict[str, tuple[array, array]] = {}  # name -> (times, values): 16 bytes a point
        self.workload_runs = workload_runs  # WorkloadRuns: the points also go to the runs the workload started
        self.summaries = Summaries()
        self.writer = MetricWriter(client, run_id, tracking_uri)
        # every point that says something new goes to the run's timeline artifact; the store gets its
        # bounded shape (every one of them with full_rate: `--full-rate-store`)
        self.full_rate = full_rate_default() if full_rate is None else full_rate
        self.points = RunPoints(self.writer.add, self.full_rate, spill_dir)
        self.monitor = Monitor(listeners, self._sink)
        self.started = self.stopped = None
        self.window = None  # the active phase the summary used (radt_ext.figures.active.Window)

    def _sink(self, listener: str, reading: Reading) -> None:
        t = reading.time
        values = []
        for name, value in reading.values.items():
            if value is None:
                continue
            value = float(value)  # not a number: raises here, before it reaches the writer's batch
            if value == value:  # NaN: MLflow stores it, but it means "no reading"
                values.append((name, value))
        if not values:
            return
        self.summaries.add_all(t, values)
        ts = int(t * 1000)
        step = max(0, int((t - self.t0) * 1000))
        for name, value in values:
            self.points.add(PREFIX + name, value, ts, step)
        if self.keep is not None:
            for name, value in values:
                if self.keep.match(name):
                    times, kept = self._kept.setdefault(name, (array("d"), array("d")))
                    times.append(t)
                    kept.append(value)
        if self.workload_runs is not None:
            self.workload_runs.add_all(t, values)

    @property
    def series(self) -> dict[str, list[tuple[float, float]]]:
        """The kept series as (time s, value) points."""
        return {name: list(zip(times, values)) for name, (times, values) in list(self._kept.items())}

    def bind(self, client, run_id: str) -> "Recorder":
        """Made before its run existed: the points held so far go to `run_id`."""
        self.writer.bind(client, run_id)
        return self

    def start(self) -> "Recorder":
        self.started = time.time()
        self.writer.start()
        self.monitor.start()
        return self

    def stop(self, timeout: float | None = None, defer_close: bool = False) -> None:
        """The listeners' last readings, then flush; `timeout`: seconds for the writer's last batches (else its
        own). The listeners are closed by then, or with `defer_close` close on while the run is written
        (`wait_closed`)."""
        self.monitor.stop(defer_close=defer_close)
        self.stopped = time.time()
        self.points.flush()
        self.writer.close(timeout)

    def wait_closed(self, timeout: float = 10.0) -> None:
        self.monitor.wait_closed(timeout)

    timelines_error = None  # why the timeline artifact was not stored (log_timelines)

    def log_timelines(self, client, run_id: str, call=None, keep: bool = False) -> str | None:
        """After stop(): the run's full-rate timelines as its artifact (timelines/system.parquet); None when
        stored, else the one-line reason (also the run's tag `radt_ext.timelines_error`). `keep`: the file
        stays for `logged_timelines` (the run's report)."""
        self.timelines_error = self.points.log_artifact(client, run_id, call, self.writer.tracking_uri, keep)
        return self.timelines_error

    def logged_timelines(self) -> dict | None:
        """The timeline file log_timelines(keep=True) logged, read back from the local disk (then removed)."""
        return self.points.read_kept()

    def drop_logged_timelines(self) -> None:
        self.points.drop_kept()

    def summary(self, marks=None, logged=None, window=None) -> dict[str, float]:
        """The run's summaries over its active phase (found from the workload's marks, else its logged
        metrics' span `logged`, else the whole run; or the `window` given) and over the whole run."""
        from radt_ext.figures.active import summarise

        end = self.until or self.stopped or time.time()
        summary, self.window = summarise(self.summaries, self.started or self.t0, end, marks, logged, window,
                                         owns_workload=True)
        return summary

    def listener_tags(self) -> dict[str, str]:
        tags = {}
        if self.window is not None:
            from radt_ext.figures.active import tags as active_tags

            tags.update(active_tags(self.window))
        for name, state in self.monitor.states.items():
            try:
                tags.update({f"machine.{k}": str(v) for k, v in state.listener.tags().items()})
            except Exception:
                pass
            tags[f"radt_ext.listener.{name}.samples"] = str(state.samples)
            if state.error:
                tags[f"radt_ext.listener_error.{name}"] = state.error[:4000]
        tags["radt_ext.metrics_sent"] = str(self.writer.sent)
        tags["radt_ext.metrics_stored"] = str(self.writer.stored)
        tags.update(self.points.tags())
        if self.timelines_error:
            tags["radt_ext.timelines_error"] = self.timelines_error[:4000]
        if self.writer.spooled:
            tags["radt_ext.metrics_spooled"] = str(self.writer.spooled)
            tags["radt_ext.spool_file"] = str(self.writer.spool_path)
        if self.writer.errors:
            tags["radt_ext.writer_error"] = self.writer.errors[-1][:4000]
        return tags
