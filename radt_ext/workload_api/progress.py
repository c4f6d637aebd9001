"""Workload-side progress reports and phase marks: `radt_ext.log_progress(samples=...)`,
`with radt_ext.phase("train"):`.

The workload (a child of `radt-ext run`, or the script inside `track()`) adds up what it has
processed; the session reads the records at the end to find the active phase and derive throughput
and energy per sample over any span. The channel is a small append-only file named by
RADT_EXT_PROGRESS_FILE, one JSON line per record, each written with one O_APPEND write so that lines
from several processes (the ranks of a job) never interleave and a workload killed mid-write leaves
at most one unreadable last line:

    {"pid": 12, "t": 1700000000.5, "samples": 512.0, "steps": 2.0, "flops": ...}   # cumulative, this process
    {"pid": 12, "t": 1700000001.0, "phase": "train", "event": "start"}

Records of the start-up hook that counts an unmodified script's work (autoprogress/) carry a `src`
(`torch`, `keras`, `mlflow-steps`) and that framework's counters; `read_marks` takes one source and
turns its counters into these totals (progress_sources.py), so the figures, the guard and the planner
read every workload alike.

A progress record's `t` is the time of the last `log_progress` call it counts. Records are written
at most every WRITE_EVERY_S seconds (a write costs ~0.1 ms, too much for every step of a fast loop),
at once for the first call, at every phase mark (stamped with the mark's time) and at interpreter exit; `flush()` writes one now.
"""
from __future__ import annotations

import atexit
import bisect
import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field

from radt_ext.workload_api import progress_sources as sources

ENV = "RADT_EXT_PROGRESS_FILE"
WRITE_EVERY_S = 0.5
_lock = threading.Lock()
_totals: dict[str, float] = {}
_state = {"written": 0.0, "dirty": False, "atexit": False, "last": 0.0}


def log_progress(samples: float = 0, steps: float = 0, flops: float = 0, **counters: float) -> None:
    """Add to the workload's running totals (samples processed, optimizer steps, FLOPs done).

    Cheap enough to call every step. Without a session around the workload it only
    keeps the totals in memory.
    """
    with _lock:
        for key, value in (("samples", samples), ("steps", steps), ("flops", flops), *counters.items()):
            if value:
                _totals[key] = _totals.get(key, 0.0) + float(value)
        now = time.time()
        _state["last"] = now
        _state["dirty"] = True
        _register()
        if now - _state["written"] >= WRITE_EVERY_S:
            _write_totals()


@contextlib.contextmanager
def phase(name: str):
    """Mark a phase of the workload (train, eval, inference, ...): its span is the run's active phase.

        with radt_ext.phase("train"):
            for batch in loader: ...

    Phases may repeat and nest; the active phase runs from the first phase's start to the last
    one's end. Outside radt-ext it costs nothing but two small writes skipped.
    """
    if not name or not str(name).replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"phase name {name!r}: use letters, digits, '_' or '-', e.g. 'train'")
    _mark(str(name), "start")
    try:
        yield
    finally:
        _mark(str(name), "end")


def _mark(name: str, event: str) -> None:
    with _lock:
        _register()
        now = time.time()
        if _totals:  # the totals at the mark, stamped with its time: samples inside a phase are counted exactly
            _state["written"], _state["dirty"] = now, False
            _append({"pid": os.getpid(), "t": now, **_totals})
        _append({"pid": os.getpid(), "t": now, "phase": name, "event": event})


def flush() -> None:
    """Write the totals now (the session reads them when the workload ends)."""
    with _lock:
        if _state["dirty"]:
            _write_totals()


def _register() -> None:
    if not _state["atexit"]:
        atexit.register(flush)
        _state["atexit"] = True


def _write_totals() -> None:
    _state["written"] = time.time()
    _state["dirty"] = False
    _append({"pid": os.getpid(), "t": _state["last"], **_totals})


def _append(record: dict) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # progress is a nicety; never fail the workload over it


# -- the session's side ------------------------------------------------------------------------

@dataclass
class Marks:
    """What a workload wrote: each process's cumulative totals over time (of the one source that counts,
    as `samples` / `steps` / `flops` / `epochs`), its phase marks and its training epochs."""

    series: dict[int, list[tuple[float, dict[str, float]]]] = field(default_factory=dict)  # pid -> [(t, totals)]
    phases: list[tuple[float, str, str]] = field(default_factory=list)  # (t, name, "start"|"end")
    epochs: list[tuple[float, float]] = field(default_factory=list)  # completed training epochs: (start, end)
    source: str = "none"  # the run's tag radt_ext.progress_source (progress_sources.py)
    note: str = ""  # what was counted, or why nothing was

    def progress_times(self, start: float = float("-inf"), end: float = float("inf")) -> list[float]:
        """Times of the progress records within [start, end], sorted."""
        return sorted(t for points in self.series.values() for t, _ in points if start <= t <= end)

    def phase_span(self, start: float = float("-inf"), end: float = float("inf")) -> tuple[float, float] | None:
        """From the first phase start to the last phase end, clipped to [start, end]; a phase still
        open at the end (the workload died in it) ends at `end`."""
        starts = [t for t, _, event in self.phases if event == "start" and t <= end]
        if not starts:
            return None
        first = max(min(starts), start)
        ends = [t for t, _, event in self.phases if event == "end" and first <= t]
        opened = sum(1 for _, _, e in self.phases if e == "start") > sum(1 for _, _, e in self.phases if e == "end")
        last = end if (opened or not ends) else min(max(ends), end)
        return (first, last) if last > first else None

    def phase_seconds(self, start: float = float("-inf"), end: float = float("inf")) -> dict[str, float]:
        """Seconds spent in each named phase within [start, end] (repeats added, nesting per name)."""
        out: dict[str, float] = {}
        open_at: dict[tuple[int, str], float] = {}
        for t, name, event in sorted(self.phases):
            key = (0, name)
            if event == "start":
                open_at.setdefault(key, t)
            elif key in open_at:
                a, b = max(open_at.pop(key), start), min(t, end)
                if b > a:
                    out[name] = out.get(name, 0.0) + b - a
        for (_, name), a in open_at.items():
            a = max(a, start)
            if end > a and end != float("inf"):
                out[name] = out.get(name, 0.0) + end - a
        return out

    def total_at(self, key: str, t: float) -> float:
        """The key's total over all processes at time t: each process's records, linear between two
        records, 0 before its first, its last total after its last."""
        out = 0.0
        for points in self.series.values():
            i = bisect.bisect_right(points, t, key=lambda p: p[0]) - 1
            if i < 0:
                continue
            t0, value = points[i][0], points[i][1].get(key, 0.0)
            if i + 1 < len(points) and points[i + 1][0] > t0:
                t1, b = points[i + 1]
                value += (b.get(key, 0.0) - value) * (t - t0) / (t1 - t0)
            out += value
        return out

    def totals(self) -> dict[str, float]:
        """Every process's last totals added up, with the time of the last record as `time`."""
        out = sources.last_totals(self.series)
        times = [points[-1][0] for points in self.series.values() if points]
        if times:
            out["time"] = max(times)
        return out


def read_marks(path: str | None, off: bool = False, missing: str | None = None) -> Marks:
    """Everything a workload wrote to `path`, its progress taken from the one source that counts (a Marks
    with nothing in it when it wrote none). off: progress counting was turned off for it; missing: why
    the start-up hook could not load (both said in the note)."""
    marks = Marks()
    by_source: dict[str, dict[int, list]] = {}
    epoch_marks: dict[str, dict[tuple[int, int], dict[str, float]]] = {}
    hooked: set[str] = set()
    loaded = False
    errors: list[str] = []
    lines: list[bytes] = []
    if path:
        try:
            with open(path, "rb") as fh:
                lines = fh.read().splitlines()
        except OSError:
            pass
    for line in lines:
        try:
            record = json.loads(line)
            pid, t = int(record.pop("pid")), float(record.pop("t"))
            src = str(record.pop("src", sources.LOG_PROGRESS))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a line cut short by a kill
        if "phase" in record:
            if record.get("event") in ("start", "end"):
                marks.phases.append((t, str(record["phase"]), record["event"]))
            continue
        if "epoch" in record:
            if record.get("event") in ("start", "end"):
                epoch_marks.setdefault(src, {}).setdefault((pid, int(record["epoch"])), {})[record["event"]] = t
            continue
        if record.get("hooked"):
            hooked.add(src)
            continue
        if record.get("loaded"):
            loaded = True
            continue
        if "error" in record:
            errors.append(f"{src}: {record['error']}")
            continue
        totals = {k: float(v) for k, v in record.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        by_source.setdefault(src, {}).setdefault(pid, []).append((t, totals))
    for series in by_source.values():
        for points in series.values():
            points.sort(key=lambda p: p[0])
    marks.phases.sort()
    source, mode = sources.choose(by_source)
    chosen = by_source.get(source, {})
    marks.source = source
    marks.note = sources.note(source, mode, sources.last_totals(chosen), hooked, errors, off, loaded, missing)
    if mode is None:
        marks.series = chosen
    else:
        marks.series = {}
        for pid, points in chosen.items():  # from each process's first count of the chosen kind
            converted = [(t, sources.standard(raw, mode)) for t, raw in points]
            first = next((i for i, (_, v) in enumerate(converted) if any(v.values())), None)
            if first is not None:
                marks.series[pid] = converted[first:]
        if mode in sources.TRAINING_MODES:
            marks.epochs = _epochs(epoch_marks.get(source, {}))
    return marks


def _epochs(marks: dict[tuple[int, int], dict[str, float]]) -> list[tuple[float, float]]:
    """Completed epochs, in order: epoch n of a multi-process job spans from its first rank's start to
    its last rank's end (the ranks run their epochs side by side)."""
    spans: dict[int, list[float]] = {}
    for (_, n), ends in marks.items():
        if "start" in ends and "end" in ends and ends["end"] >= ends["start"]:
            lo, hi = spans.get(n, (ends["start"], ends["end"]))
            spans[n] = [min(lo, ends["start"]), max(hi, ends["end"])]
    return [(lo, hi) for _, (lo, hi) in sorted(spans.items())]


def read_progress(path: str) -> dict[str, float]:
    """The workload's totals (all its processes added up); {} when it wrote none."""
    return read_marks(path).totals()
