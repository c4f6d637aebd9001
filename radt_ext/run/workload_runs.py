"""The runs a workload starts itself, each given the hardware points of its own time span.

The workload's `mlflow.start_run()` (and autologging, Lightning's `MLFlowLogger`, the Hugging Face
`Trainer`'s callback, which all go through MLflow's run context providers) announces each new run
in a file and tags it (run_context.py). This tracker reads the announcements, finds the runs in the
store by their tag, follows them until they end, and hands every point to each run whose span
[start, end] holds it: a nested run and its parent both get the points of the child's span. Each
run gets `system/*` points (step = ms since that run started) and `summary/*` over its own span and
its own active phase (radt_ext/figures/active.py: the workload's phase marks or progress inside the run's span,
else the metrics the run logged itself), logged when it ends; its status stays the workload's, unless the workload dies with the run still
RUNNING, when the run gets the command's status.

Points wait in memory until their routing is known. A point read at time t is routed once nothing
can still start or end before t unseen: no announced start is still unresolved, and the store
was read at least ROUTE_LAG_S after t (a run's start and end times are taken by the workload's
client just before it tells the store). `add_all()` is all the sampling path pays: a deque extended.
"""
from __future__ import annotations

import collections
import json
import logging
import threading
import time
from dataclasses import dataclass, field

from radt_ext.figures import active
from radt_ext.figures.energy import ENERGY, EnergySeries
from radt_ext.workload_api.markers import TAG_MONITOR_RUN, TAG_START_ID
from radt_ext.run.spills import run_dir
from radt_ext.store.run_points import RunPoints, full_rate_default
from radt_ext.workload_api.progress import read_marks
from radt_ext.figures.summaries import Summaries
from radt_ext.store.writer import MetricWriter, first_line

log = logging.getLogger(__name__)

PREFIX = "system/"
# A poll reads each open run from the store (get_run: ~4 ms of CPU on SQLite, more than the nvml listener
# spends in a second): every 2 s. Points reach the workload's runs that much later, none is lost.
POLL_S = 2.0
ROUTE_LAG_S = 2.0
UNRESOLVED_S = 15.0  # an announcement whose run never appears (its create_run failed) stops holding points back
MAX_PENDING = 200_000  # points held back at most (store unreadable for minutes); beyond, routed by what is known
# An ended run waits for the energy series to pass its end (the points between two counter reads come
# with the second, read every 30 s), at most this long after its end; radt-ext's end finalises every run.
ENERGY_WAIT_S = 45.0
ENDED = ("FINISHED", "FAILED", "KILLED")


@dataclass
class WorkloadRun:
    run_id: str
    experiment_id: str
    start: float  # s since the epoch
    end: float | None = None
    writer: MetricWriter | None = None
    points: RunPoints | None = None  # the run's timeline artifact, and its shape in front of the writer
    summaries: Summaries = field(default_factory=lambda: Summaries(counters_from_zero=False))


class WorkloadRuns:
    def __init__(self, client, tracking_uri: str, monitor_run_id: str | None, starts_path: str,
                 tags: dict[str, str] | None = None, poll: float = POLL_S, lag: float = ROUTE_LAG_S,
                 progress_path: str | None = None, full_rate: bool | None = None, spill_dir: str | None = None):
        self.client = client
        self.full_rate = full_rate_default() if full_rate is None else full_rate  # every point into the store
        self.spill_dir = spill_dir  # where each run's timeline waits for its end: a folder per run (spills.py)
        self.tracking_uri = tracking_uri
        self.monitor_run_id = monitor_run_id
        self.starts_path = starts_path
        self.tags = dict(tags or {})  # logged on each run when it ends (machine description, listeners)
        self.poll = poll
        self.lag = lag
        self.progress_path = progress_path  # the workload's progress and phase marks (radt_ext.workload_api.progress)
        self.runs: dict[str, WorkloadRun] = {}  # every run found, in order of start
        self.errors: list[str] = []
        self._open: list[WorkloadRun] = []  # found and not yet finalised
        self._announced: dict[str, float] = {}  # start id -> time announced, run not found yet
        self._seen_start_ids: set[str] = set()
        self._offset = 0
        self._pending: collections.deque = collections.deque()
        self.energy = EnergySeries()  # every gpu{i}_energy_j point: each run's energy over its own span
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="radt-workload-runs", daemon=True)

    # -- the sampling path ---------------------------------------------------------
    def add_all(self, t: float, values) -> None:
        """Several metrics read at one time t: (name, value) pairs."""
        self._pending.extend((t, name, value) for name, value in values)

    # -- lifecycle -------------------------------------------------------------------
    def bind(self, client, monitor_run_id: str) -> "WorkloadRuns":
        """Made before radt-ext's run existed: now it does (points held so far are routed as usual)."""
        self.client, self.monitor_run_id = client, monitor_run_id
        return self

    def start(self) -> "WorkloadRuns":
        self._thread.start()
        return self

    def close(self, status: str, settle_s: float = 2.0) -> None:
        """After the workload ended: find its last runs, end those it left RUNNING with `status`,
        route every point left and log each run's summaries."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(60)
        if self.monitor_run_id is None:  # radt-ext's run was never made: no run to find
            return
        deadline = time.time() + settle_s
        while True:  # a create_run the workload sent just before it died may still be landing
            self._guard(self._refresh)
            if not self._announced or time.time() > deadline:
                break
            time.sleep(0.1)
        now = time.time()
        for run in self._open:
            if run.end is None:
                self._guard(lambda r=run: self.client.set_terminated(r.run_id, status, int(now * 1000)))
                run.end = now
        self._route(float("inf"))
        for run in list(self._open):
            self._finalise(run)

    def monitor_tags(self) -> dict[str, str]:
        """Tags for radt-ext's own run: which runs the workload started."""
        tags = {"radt_ext.workload_runs": str(len(self.runs))}
        if self.runs:
            tags["radt_ext.workload_run_ids"] = ",".join(self.runs)[:5000]
        if self.errors:
            tags["radt_ext.workload_runs_error"] = self.errors[-1][:4000]
        return tags

    # -- the thread --------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.poll):
            self._guard(self._step)

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as exc:  # the store hiccups: the next poll tries again
            message = first_line(exc)
            if not self.errors or self.errors[-1] != message:
                log.warning("radt-ext: following the workload's runs: %s", message)
            self.errors.append(message)

    def _step(self) -> None:
        read_at = time.time()
        self._refresh()
        watermark = read_at - self.lag
        if self._announced:
            watermark = min(watermark, min(self._announced.values()))
        self._route(watermark)
        for run in list(self._open):
            if run.end is not None and run.end <= watermark and (
                    self.energy.covers(run.end) or time.time() - run.end > ENERGY_WAIT_S):
                self._finalise(run)

    def _refresh(self) -> None:
        self._read_announcements()
        if self._announced:
            self._find_announced()
        for run in self._open:
            if run.end is None:
                info = self.client.get_run(run.run_id).info
                if info.status in ENDED:
                    run.end = (info.end_time or int(time.time() * 1000)) / 1000.0

    def _read_announcements(self) -> None:
        try:
            with open(self.starts_path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += end
        for line in data[:end].splitlines():
            try:
                entry = json.loads(line)
                start_id, when = str(entry["start_id"]), float(entry["time"])
            except (ValueError, KeyError, TypeError):
                continue
            if start_id not in self._seen_start_ids:
                self._announced[start_id] = when

    def _find_announced(self) -> None:
        from mlflow.entities import ViewType

        experiments = [e.experiment_id for e in self._all_experiments()]
        since_ms = int((min(self._announced.values()) - 1.0) * 1000)  # a run starts after its announcement
        query = f"tags.`{TAG_MONITOR_RUN}` = '{self.monitor_run_id}' and attributes.start_time >= {since_ms}"
        found = []
        for i in range(0, len(experiments), 100):
            found += self.client.search_runs(experiments[i:i + 100], filter_string=query,
                                             run_view_type=ViewType.ALL, max_results=50_000)
        for run in sorted(found, key=lambda r: r.info.start_time):
            start_id = run.data.tags.get(TAG_START_ID, run.info.run_id)
            if run.info.run_id in self.runs:
                continue
            self._seen_start_ids.add(start_id)
            self._announced.pop(start_id, None)
            info = run.info
            found_run = WorkloadRun(info.run_id, info.experiment_id, info.start_time / 1000.0)
            if info.status in ENDED:
                found_run.end = (info.end_time or info.start_time) / 1000.0
            found_run.writer = MetricWriter(self.client, info.run_id, self.tracking_uri).start()
            found_run.points = RunPoints(found_run.writer.add, self.full_rate,
                                         self.spill_dir and run_dir(self.spill_dir, info.run_id))
            self.runs[info.run_id] = found_run
            self._open.append(found_run)
        now = time.time()
        for start_id, when in list(self._announced.items()):
            if now - when > UNRESOLVED_S:  # its create_run failed, or it was no run after all
                self._seen_start_ids.add(start_id)
                del self._announced[start_id]

    def _all_experiments(self):
        from mlflow.entities import ViewType

        out, token = [], None
        while True:
            page = self.client.search_experiments(view_type=ViewType.ALL, max_results=1000, page_token=token)
            out += list(page)
            token = page.token
            if not token:
                return out

    # -- routing -----------------------------------------------------------------------
    def _route(self, watermark: float) -> None:
        """Hand every point up to the watermark to the runs whose span holds it."""
        pending = self._pending
        while pending:
            t = pending[0][0]
            if t > watermark and len(pending) <= MAX_PENDING:
                return
            t, name, value = pending.popleft()
            if name.endswith("_energy_j") and ENERGY.match(name):
                self.energy.add(name, t, value)
            for run in self._open:
                if run.start <= t and (run.end is None or t <= run.end):
                    run.points.add(PREFIX + name, value, int(t * 1000), int((t - run.start) * 1000))
                    run.summaries.add(name, t, value)

    def _finalise(self, run: WorkloadRun) -> None:
        from mlflow.entities import Metric

        self._open.remove(run)
        run.points.flush()
        run.writer.close()
        end = run.end if run.end is not None else time.time()
        end = max(end, run.start)
        summary, window = active.summarise(run.summaries, run.start, end, read_marks(self.progress_path),
                                            lambda: active.logged_span(self.client, [run.run_id]), energy=self.energy)
        metrics = [Metric(f"summary/{k}", float(v), int(end * 1000), 0) for k, v in summary.items()]
        tags = dict(self.tags)
        tags.update(active.tags(window))
        tags["radt_ext.metrics_sent"] = str(run.writer.sent)
        tags["radt_ext.metrics_stored"] = str(run.writer.stored)
        tags.update(run.points.tags())
        failed = run.points.log_artifact(self.client, run.run_id, tracking_uri=self.tracking_uri)
        if failed:
            tags["radt_ext.timelines_error"] = failed[:4000]
        if run.writer.spooled:
            tags["radt_ext.metrics_spooled"] = str(run.writer.spooled)
            tags["radt_ext.spool_file"] = str(run.writer.spool_path)
        try:
            run.writer.end_run(metrics, tags, None)  # spooled for `radt-ext sync` when the store is away
        except Exception as exc:
            self.errors.append(first_line(exc))
