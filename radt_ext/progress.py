"""Workload-side progress reports: `radt_ext.log_progress(samples=...)`.

The workload (a child of `radt-ext run`, or the script inside `track()`) adds up
what it has processed; the session reads the totals at the end to derive
throughput and energy per sample. The channel is a small JSON file named by
RADT_EXT_PROGRESS_FILE, replaced atomically, so a workload killed mid-write never
leaves half a record. The file is rewritten at most every WRITE_EVERY_S seconds
(a write costs ~0.1 ms, too much for every step of a fast loop) and once more at
interpreter exit; `flush()` writes it now.
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time

ENV = "RADT_EXT_PROGRESS_FILE"
WRITE_EVERY_S = 0.5
_lock = threading.Lock()
_totals: dict[str, float] = {}
_state = {"written": 0.0, "dirty": False, "atexit": False}


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
        _totals["time"] = now
        _state["dirty"] = True
        if not _state["atexit"]:
            atexit.register(flush)
            _state["atexit"] = True
        if now - _state["written"] >= WRITE_EVERY_S:
            _write()


def flush() -> None:
    """Write the totals now (the session reads them when the workload ends)."""
    with _lock:
        if _state["dirty"]:
            _write()


def _write() -> None:
    path = os.environ.get(ENV)
    _state["written"] = time.time()
    _state["dirty"] = False
    if path:
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as fh:
                json.dump(_totals, fh)
            os.replace(tmp, path)
        except OSError:
            pass  # progress is a nicety; never fail the workload over it


def read_progress(path: str) -> dict[str, float]:
    """The last totals a workload wrote to `path`; {} when it wrote none."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}
