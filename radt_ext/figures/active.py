"""The active phase of a run: the span in which the workload did its work, found once per run.

Sources, best first (the run's tag `radt_ext.active_source` says which one was used):

- `phase`: the workload's phase marks (`with radt_ext.phase("train"):`), from the first phase's start
  to the last phase's end within the run's span;
- `progress`: the workload's progress, first to last counted step within the span: its own
  `radt_ext.log_progress` reports, else what the start-up hook counted in an unmodified script
  (radt_ext.workload_api.progress_sources);
- `logged_metrics`: the metrics the run itself logs (autolog, Lightning, the Hugging Face Trainer):
  first to last logged time of a metric that is not radt-ext's own (`system/*`, `summary/*`);
- `whole_run`: the run's whole span when none of the above marks at least two distinct moments.
"""
from __future__ import annotations

from dataclasses import dataclass

from radt_ext.figures.epochs import figures as epoch_figures
from radt_ext.workload_api.progress import Marks

TAG = "radt_ext.active_source"


def tags(window: "Window") -> dict[str, str]:
    """The run's tags for its active phase: the source and the span (s since the epoch)."""
    return {TAG: window.source, "radt_ext.active_start": f"{window.start:.3f}", "radt_ext.active_end": f"{window.end:.3f}"}
@dataclass(frozen=True)
class Window:
    start: float  # s since the epoch
    end: float
    source: str  # phase, progress, logged_metrics or whole_run


def find(run_start: float, run_end: float, marks: Marks | None = None, logged=None) -> Window:
    """The active window of a run spanning [run_start, run_end]; `logged` = (first, last) time of the
    run's own logged metrics, or a function returning it (called only when the marks say nothing; one
    that raises, a store away, counts as none)."""
    if marks is not None:
        span = marks.phase_span(run_start, run_end)
        if span is not None:
            return Window(span[0], span[1], "phase")
        times = marks.progress_times(run_start, run_end)
        if times and times[-1] > times[0]:
            return Window(times[0], times[-1], "progress")
    if callable(logged):
        try:
            logged = logged()
        except Exception:  # the store is away: the whole run then
            logged = None
    if logged is not None:
        first, last = max(logged[0], run_start), min(logged[1], run_end)
        if last > first:
            return Window(first, last, "logged_metrics")
    return Window(run_start, run_end, "whole_run")


def logged_span(client, run_ids, ignore=("system/", "summary/")) -> tuple[float, float] | None:
    """(first, last) time the runs' own metrics were logged, None when they logged none. Reads the
    history of each of their metrics once, at the run's end."""
    first, last = float("inf"), float("-inf")
    for run_id in run_ids:
        run = client.get_run(run_id)
        for key in [k for k in run.data.metrics if not k.startswith(ignore)]:
            for m in client.get_metric_history(run_id, key):
                first, last = min(first, m.timestamp / 1000.0), max(last, m.timestamp / 1000.0)
    return (first, last) if last >= first else None


def counts(marks: Marks | None, a: float, b: float) -> dict[str, float]:
    """What the workload counted (samples, steps, flops) between its records at times a and b."""
    if marks is None or not marks.series:
        return {}
    return {key: marks.total_at(key, b) - marks.total_at(key, a) for key in ("samples", "steps", "flops")}


def summarise(summaries, start: float, end: float, marks: Marks | None = None, logged=None,
              window: Window | None = None, owns_workload: bool = False, energy=None) -> tuple[dict[str, float], Window]:
    """A run's `summary/*` values over its active phase and its whole span [start, end], and the
    window used (found here unless given). owns_workload: the run spans the whole workload (radt-ext's
    own run), so everything it counted is the run's. energy: a radt_ext.figures.energy.EnergySeries holding the
    session's energy series beyond the run's own points (a run the script opens)."""
    window = window or find(start, end, marks, logged)
    whole = counts(marks, float("-inf") if owns_workload else start, end)
    out = summaries.result(start, end, window, counts(marks, window.start, window.end), whole, energy)
    if marks is not None:
        for name, seconds in marks.phase_seconds(start, end).items():
            out[f"phase_{name}_s"] = seconds
        out.update(epoch_figures(summaries, marks.epochs, start, end))
    return out, window


def overlap(windows: list[Window]) -> tuple[float, float] | None:
    """The span in which every window is active; None when they do not all meet."""
    if not windows:
        return None
    start, end = max(w.start for w in windows), min(w.end for w in windows)
    return (start, end) if end > start else None
