"""Reading runs back from the store for reports: system timelines, epoch markers, children.

Reports are the one place that reads a run's metric history back (once, at the end; the `system/*`
timelines from the run's full-rate timeline artifact where it has one, radt_ext/store/timelines.py);
summaries never do.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

from radt_ext.figures.summary_names import upgrade
from radt_ext.store import timelines as _timelines

SYSTEM = "system/"
PROGRESS = "progress/"  # radt-ext's timeline of the workload's counted work (samples/s)
SUMMARY = "summary/"
MAX_MARKERS = 200


@dataclass
class Series:
    t: list[float]  # seconds since the report's time origin
    v: list[float]


@dataclass
class RunData:
    run_id: str
    name: str
    start_s: float  # run start, seconds since the epoch
    status: str
    tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]  # latest values (summary/* among them)
    system: dict[str, Series] = field(default_factory=dict)  # listener metric name -> series
    markers: list[tuple[float, str]] = field(default_factory=list)  # (seconds since origin, label)
    epochs: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, label)
    active: tuple[float, float] | None = None  # the active phase (start, end) the summaries cover

    @property
    def summary(self) -> dict[str, float]:
        """The run's summaries by today's names (runs recorded before read under their e2e_ names)."""
        return upgrade({k[len(SUMMARY):]: v for k, v in self.metrics.items() if k.startswith(SUMMARY)}, prefix="")


def run_name(run) -> str:
    return run.data.tags.get(MLFLOW_RUN_NAME) or run.info.run_name or run.info.run_id[:8]


def load_run(client, run_id: str, origin_s: float | None = None, run=None, timelines: dict | None = None) -> RunData:
    """A run with its system timelines and epoch/phase markers, times relative to origin_s
    (default: the first point of the run). `timelines`: the run's timeline file already read
    (store.timelines.read_file), so it is not fetched back from the artifact store."""
    run = run or client.get_run(run_id)
    # system timelines at their full rate from the run's timeline artifact where it has one (the store
    # holds their bounded shape), the workload's own metrics from the store
    histories = _timelines.history(client, run_id, [key for key in run.data.metrics if not key.startswith(SUMMARY)],
                                   timelines)
    if origin_s is None:
        stamps = [m.timestamp for hist in histories.values() for m in hist]
        origin_s = min(stamps + [run.info.start_time]) / 1000.0
    data = RunData(run_id=run_id, name=run_name(run), start_s=run.info.start_time / 1000.0,
                   status=run.info.status, tags=dict(run.data.tags), params=dict(run.data.params),
                   metrics=dict(run.data.metrics))
    workload = {}
    for key, hist in histories.items():
        hist = sorted(hist, key=lambda m: (m.timestamp, m.step))
        if key.startswith((SYSTEM, PROGRESS)):  # the counted work's rate is drawn beside the hardware's
            data.system[key.split("/", 1)[1]] = Series([m.timestamp / 1000.0 - origin_s for m in hist],
                                                    [m.value for m in hist])
        else:
            workload[key] = hist
    data.epochs, data.markers = _markers(workload, origin_s)
    try:
        data.active = (float(run.data.tags["radt_ext.active_start"]) - origin_s,
                       float(run.data.tags["radt_ext.active_end"]) - origin_s)
    except (KeyError, ValueError):
        pass  # recorded before active phases, or not ended yet
    return data


def _markers(workload: dict, origin_s: float):
    """Epoch bands from epoch_start/end_time_s metrics when the workload logs them; otherwise
    one marker per point of the workload metric with the most distinct steps (per-epoch
    metrics), so per-step loss curves with thousands of points do not become markers."""
    starts = {m.step: m.value for m in workload.get("epoch_start_time_s", [])}
    ends = {m.step: m.value for m in workload.get("epoch_end_time_s", [])}
    if starts and ends:
        epochs = [(starts[s] - origin_s, ends[s] - origin_s, f"epoch {s}") for s in sorted(starts) if s in ends]
        return epochs[:MAX_MARKERS], []
    best, best_steps = None, 1
    for key in sorted(workload):
        steps = {m.step for m in workload[key]}
        if best_steps < len(steps) <= MAX_MARKERS:
            best, best_steps = key, len(steps)
    if best is None:
        return [], []
    seen, markers = set(), []
    for m in workload[best]:
        if m.step not in seen:
            seen.add(m.step)
            markers.append((m.timestamp / 1000.0 - origin_s, f"{best} step {m.step}"))
    return [], markers


def children(client, parent_run_id: str, experiment_ids: list[str] | None = None, anywhere: bool = True):
    """Child runs of a collocation parent (tag mlflow.parentRunId), oldest first: looked for in
    the given experiments (default the parent's), then (`anywhere`) in every experiment."""
    if experiment_ids is None:
        experiment_ids = [client.get_run(parent_run_id).info.experiment_id]
    query = f"tags.`{MLFLOW_PARENT_RUN_ID}` = '{parent_run_id}'"
    found = client.search_runs(experiment_ids, filter_string=query, order_by=["attributes.start_time ASC"],
                               max_results=1000)
    if not found and anywhere:
        found = client.search_runs(all_experiment_ids(client), filter_string=query,
                                   order_by=["attributes.start_time ASC"], max_results=1000)
    return found


def all_experiment_ids(client) -> list[str]:
    return [e.experiment_id for e in client.search_experiments(max_results=1000)]


def sweep_runs(client, sweep_id: str, experiment_ids: list[str] | None = None, every: bool = False):
    """The sweep's runs (groups' parents and children), not its own runs (its report, its settings' means;
    `every`: those too), oldest first."""
    runs = client.search_runs(experiment_ids or all_experiment_ids(client),
                              filter_string=f"tags.`sweep.id` = '{sweep_id}'", max_results=50000,
                              order_by=["attributes.start_time ASC"])
    return runs if every else variant_runs(runs)


def variant_runs(runs: list) -> list:
    """The runs of the sweep's variants among `runs`: not its own (its report, its settings' means)."""
    return [r for r in runs if not r.data.tags.get("sweep.role")]
