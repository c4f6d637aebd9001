"""Where one run's `system/*` points go: every one to its timeline artifact, a bounded shape to the store.

    readings ─► PointFilter (a value's repeats held back) ─┬─► TimelineSpill ─► timelines/system.parquet
                                                           └─► StoreShaper ─► MetricWriter ─► store
                                                               (left out with full_rate: every point)

Summaries, the collocation energy split and the workload's runs are fed before this, from every reading.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile

from radt_ext.store.point_filter import PointFilter
from radt_ext.store.shaper import BUCKET_S, FAST_BUCKET_S, StoreShaper
from radt_ext.store.timelines import ARTIFACT_DIR, SYSTEM_FILE, TimelineSpill
from radt_ext.store.spool import TARGET, TIMELINES
from radt_ext.store.writer import absolute_uri, spool_dir

ENV_FULL_RATE = "RADT_EXT_FULL_RATE_STORE"  # "1": every run of this process tree keeps the full rate in the store


def full_rate_default() -> bool:
    return os.environ.get(ENV_FULL_RATE, "").strip().lower() in ("1", "true", "yes", "on")


def shape_tag(full_rate: bool) -> str:
    if full_rate:
        return "full_rate"
    return f"minmax:power_w={FAST_BUCKET_S:g}s,other={BUCKET_S:g}s"


class RunPoints:
    """Used from one thread at a time (the monitor's, or the workload-run router's)."""

    def __init__(self, emit, full_rate: bool = False, spill_dir: str | None = None):
        self.emit = emit
        self.full_rate = full_rate
        self.spill_dir = spill_dir
        self.timeline = TimelineSpill(spill_dir)
        self.shaper = None if full_rate else StoreShaper(emit)
        self.filter = PointFilter(self._passed)
        self.add = self.filter.add

    def _passed(self, key: str, value: float, timestamp_ms: int, step: int) -> None:
        self.timeline.add(key, value, timestamp_ms, step)
        if self.shaper is not None:
            self.shaper.add(key, value, timestamp_ms, step)
        else:
            self.emit(key, value, timestamp_ms, step)

    def flush(self) -> None:
        """The run's end: every held point out."""
        self.filter.flush()
        if self.shaper is not None:
            self.shaper.flush()

    def tags(self) -> dict[str, str]:
        return {"radt_ext.metrics_repeated": str(self.filter.held_back),
                "radt_ext.metrics_full_rate": str(self.timeline.points),
                "radt_ext.store_shape": shape_tag(self.full_rate)}

    kept: str | None = None  # the logged timeline file's folder, kept for the run's report (read_kept)

    def log_artifact(self, client, run_id: str, call=None, tracking_uri: str | None = None,
                     keep: bool = False) -> str | None:
        """Write the timeline file and log it as the run's artifact; None when done (or nothing to log),
        else the one-line reason it was not: the file then waits in the spool directory, named in the
        reason, and `radt-ext sync` logs it once the store (`tracking_uri`) answers. `call(fn)`: how to
        reach the store (the writer's deadline on a server). The file is made in a temporary folder (the
        spill file's), so a run whose store takes it leaves nothing in the spool; `keep`: the file stays
        there for `read_kept` (the report reads it instead of fetching it back)."""
        if not self.timeline.points:
            return None
        try:
            if self.spill_dir:
                os.makedirs(self.spill_dir, exist_ok=True)
            made = tempfile.mkdtemp(prefix="radt-parquet-", dir=self.spill_dir)
            path = os.path.join(made, SYSTEM_FILE)
            self.timeline.write(path)
        except Exception as exc:
            return f"cannot write the timeline file: {type(exc).__name__}: {exc}".splitlines()[0]
        self.timeline.discard()  # the file holds every point now
        try:
            (call or (lambda fn: fn()))(lambda: client.log_artifact(run_id, path, ARTIFACT_DIR))
        except Exception as exc:
            why = f"timeline artifact not stored ({type(exc).__name__}: {exc})".splitlines()[0]
            return f"{why}; the file is {_to_spool(made, run_id, tracking_uri, why)}"
        if keep:
            self.kept = made
        else:
            shutil.rmtree(made, ignore_errors=True)
        return None

    def drop_kept(self) -> None:
        made, self.kept = self.kept, None
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)

    def read_kept(self) -> dict | None:
        """The logged timeline file kept by `log_artifact(keep=True)`, read ({key: [(ms, step, value)]}) and
        removed; None where none was kept."""
        if self.kept is None:
            return None
        try:
            from radt_ext.store.timelines import read_file

            return read_file(os.path.join(self.kept, SYSTEM_FILE))
        finally:
            self.drop_kept()


def _to_spool(made: str, run_id: str, tracking_uri: str | None, why: str) -> str:
    """The timeline file in the spool for `radt-ext sync`, with where it goes and why it waits; where it
    is (left in `made` when the spool cannot take it)."""
    path = os.path.join(made, SYSTEM_FILE)
    if not tracking_uri:
        return path
    directory = spool_dir() / TIMELINES / run_id
    try:
        directory.mkdir(parents=True, exist_ok=True)
        shutil.move(path, directory / SYSTEM_FILE)
        target = {"tracking_uri": absolute_uri(tracking_uri), "run_id": run_id, "error": why}
        (directory / TARGET).write_text(json.dumps(target))
    except OSError:
        return path if os.path.exists(path) else str(directory / SYSTEM_FILE)
    shutil.rmtree(made, ignore_errors=True)
    return str(directory / SYSTEM_FILE)
