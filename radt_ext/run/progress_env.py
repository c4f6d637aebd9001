"""The workload's side of progress counting, as the session sets it up and records it.

An unmodified Python workload's work is counted by a start-up hook in its interpreter
(radt_ext.workload_api.autoprogress): the session puts the hook's `sitecustomize` first on the
workload's PYTHONPATH, or, with progress counting off (`--no-progress`, RADT_EXT_NO_PROGRESS=1), sets
RADT_EXT_NO_PROGRESS for it so no hook loads in it or in anything it starts (an install that lacks the
hook: the session says so at the start and in the run's note). At the run's end the run gets the source
that counted (tags) and a samples/s timeline from what was counted.
"""
from __future__ import annotations

import math
import os

from radt_ext.workload_api.autoprogress import SITE_DIR
from radt_ext.workload_api.progress_sources import OFF_ENV

TAG_SOURCE = "radt_ext.progress_source"
TAG_NOTE = "radt_ext.progress_note"
RATE_METRIC = "progress/throughput_samples_per_s"
RATE_BIN_S = 1.0
RATE_POINTS_MAX = 2000  # a longer run gets wider bins


def no_progress_here() -> None:
    """Progress counting off for every workload this process starts (collocate, sweep: their sessions,
    `radt-ext run` children and Slurm jobs inherit the environment)."""
    os.environ[OFF_ENV] = "1"


def progress_env(env: dict[str, str], on: bool) -> None:
    """The workload's environment `env`, with the hook on its path, or turned off."""
    site = SITE_DIR
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != site]
    if on:
        env.pop(OFF_ENV, None)
        parts.insert(0, site)
    else:
        env[OFF_ENV] = "1"
    if parts:
        env["PYTHONPATH"] = os.pathsep.join(parts)
    else:
        env.pop("PYTHONPATH", None)


def progress_tags(marks) -> dict[str, str]:
    return {TAG_SOURCE: marks.source, TAG_NOTE: marks.note[:4000]}


def rate_timeline(marks, t0: float) -> list:
    """`progress/throughput_samples_per_s`: the samples counted per second, in bins of RATE_BIN_S (wider
    for a long run), each point at its bin's end; step = ms since t0 like every point of the session."""
    from radt_ext.store.writer import Point  # the writer's own points: no MLflow import on a stop's path

    times = marks.progress_times()
    if len(times) < 2 or not any("samples" in p[-1][1] for p in marks.series.values() if p):
        return []
    first, last = times[0], times[-1]
    width = max(RATE_BIN_S, (last - first) / RATE_POINTS_MAX)
    out = []
    n = max(1, math.ceil((last - first) / width - 1e-9))
    before = marks.total_at("samples", first)
    for i in range(1, n + 1):
        b = min(last, first + i * width)
        a = first + (i - 1) * width
        now = marks.total_at("samples", b)
        if b > a:
            out.append(Point(RATE_METRIC, (now - before) / (b - a), int(b * 1000), max(0, int((b - t0) * 1000))))
        before = now
    return out
