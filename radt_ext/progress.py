"""Workload-side progress reports: `radt_ext.log_progress(samples=...)`.

The workload (a child of `radt-ext run`, or the script inside `track()`) adds up
what it has processed; the session reads the totals at the end to derive
throughput and energy per sample. The channel is a small JSON file named by
RADT_EXT_PROGRESS_FILE, replaced atomically on every call, so a workload killed
mid-write never leaves half a record.
"""
from __future__ import annotations

import json
import os
import threading
import time

ENV = "RADT_EXT_PROGRESS_FILE"
_lock = threading.Lock()
_totals: dict[str, float] = {}


def log_progress(samples: float = 0, steps: float = 0, flops: float = 0, **counters: float) -> None:
    """Add to the workload's running totals (samples processed, optimizer steps, FLOPs done).

    Cheap enough to call every step. Without a session around the workload it only
    keeps the totals in memory.
    """
    with _lock:
        for key, value in (("samples", samples), ("steps", steps), ("flops", flops), *counters.items()):
            if value:
                _totals[key] = _totals.get(key, 0.0) + float(value)
        _totals["time"] = time.time()
        path = os.environ.get(ENV)
        if path:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                json.dump(_totals, fh)
            os.replace(tmp, path)


def read_progress(path: str) -> dict[str, float]:
    """The last totals a workload wrote to `path`; {} when it wrote none."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}
