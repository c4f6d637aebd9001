"""The workload's process tree, listed once for all the listeners that ask within a second.

Listing a tree walks /proc: psutil reads every process of the host to find the children, so on a
host with a few hundred processes one listing costs milliseconds. `top` and `gpu_procs` both want
the tree about once a second; they share one listing instead of each making its own.
"""
from __future__ import annotations

import threading
import time

import psutil

LIST_EVERY_S = 1.0

_lock = threading.Lock()
_listings: dict[tuple[int, float], tuple[float, list[psutil.Process]]] = {}  # (pid, created) -> (when, members)


def members(root: psutil.Process, max_age: float = LIST_EVERY_S) -> list[psutil.Process]:
    """The root and its descendants (root first), from a listing at most `max_age` seconds old.

    Raises psutil.NoSuchProcess / AccessDenied when the root cannot be read."""
    key = (root.pid, root.create_time())
    now = time.monotonic()
    with _lock:
        listed = _listings.get(key)
    if listed is not None and now - listed[0] < max_age:
        return listed[1]
    tree = [root, *root.children(recursive=True)]
    with _lock:
        _listings[key] = (now, tree)
        for stale in [k for k, (when, _) in _listings.items() if now - when > 60.0]:
            del _listings[stale]  # workloads long gone
    return tree


def pids(pid: int | None, max_age: float = LIST_EVERY_S) -> set[int]:
    """The pid and every descendant still alive; just {pid} when psutil cannot see it."""
    if pid is None:
        return set()
    try:
        return {p.pid for p in members(psutil.Process(pid), max_age)}
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return {pid}
