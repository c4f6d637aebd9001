"""What a run's `system/*` timelines look like in the tracking store: bounded, peaks kept.

The points that reach the store at default settings are a fixed-resolution shape of the full-rate
timelines, which stay whole in the run's timeline artifact (timelines.py). Each metric's points
(after the point filter, so a flat stretch is already its first and last point) are grouped in
buckets of its step axis: `FAST_BUCKET_S` for the driver's power samples (`gpu{i}_power_w`, ~50 a
second), `BUCKET_S` for every other metric. A bucket stores

- its points as they are when there are at most `EXACT_POINTS` of them after leaving out the ones
  that repeat the value the chart already shows (a step stays a step at its own time; a metric that
  did not change stores nothing, bar a keep-alive point every `KEEPALIVE_S` so a live chart and the
  run's latest values stay fresh);
- else its lowest and its highest reading, each at its own time (min/max decimation: the chart draws
  the bucket's whole range, so no peak and no dip is lost; the end of a flat stretch of at least half a
  bucket before it is stored too, so a step into a busy bucket is not drawn as a ramp);
- for a cumulative counter (`…_energy_j`, the process tree's `proc_read_mib`/`proc_write_mib`), its
  last point (and the counter's first): its course at the bucket's resolution, exact at every stored point.

Every metric's first point is stored as it comes, and at `flush()` (the run's end) its last, so its
chart spans the run and the run's latest values are its last readings; the others wait for their
bucket to close (a live chart is at most one bucket behind). Buckets are aligned on the step axis (ms since
the session's start, a collocation group's common start), so the runs of a group and the GPUs of a run
share bucket edges.

Only the store is shaped: summaries, the collocation energy split, the workload's runs and the
timeline artifact see every point before this.
"""
from __future__ import annotations

import re
from typing import Callable

BUCKET_S = 15.0
FAST_BUCKET_S = 1.0
FAST = re.compile(r"(?:^|/)gpu\d+_power_w$")
COUNTER = re.compile(r"(?:^|/)(?:(?:gpu|cpu)\d+_\w*energy_j|proc_read_mib|proc_write_mib)$")
EXACT_POINTS = 2
KEEPALIVE_S = 60.0

Emit = Callable[[str, float, int, int], None]  # (key, value, timestamp ms, step)
Point = tuple  # (value, timestamp ms, step)


class _Key:
    __slots__ = ("bucket_ms", "counter", "bucket", "points", "shown", "held", "last", "stored_last")

    def __init__(self, bucket_ms: int, counter: bool):
        self.bucket_ms = bucket_ms
        self.counter = counter
        self.bucket: int | None = None  # index of the bucket being filled
        self.points: list[Point] = []  # its points so far
        self.shown: Point | None = None  # the last stored point: the value the chart shows now
        self.held: Point | None = None  # a later point with that value, not stored (a flat stretch's end)
        self.last: Point | None = None  # the newest point seen
        self.stored_last = False  # whether `last` is stored


class StoreShaper:
    """Sits in front of one writer (`emit` is its `add`); used from one thread at a time."""

    def __init__(self, emit: Emit, bucket_s: float = BUCKET_S, fast_bucket_s: float = FAST_BUCKET_S,
                 keepalive_s: float = KEEPALIVE_S, exact_points: int = EXACT_POINTS):
        self.emit = emit
        self.bucket_ms = max(1, int(bucket_s * 1000))
        self.fast_bucket_ms = max(1, int(fast_bucket_s * 1000))
        self.keepalive_ms = int(keepalive_s * 1000)
        self.exact_points = exact_points
        self._keys: dict[str, _Key] = {}
        self.received = 0
        self.passed = 0

    @property
    def left_out(self) -> int:
        """Points not stored (after flush(): they are in the timeline artifact only)."""
        return self.received - self.passed

    def add(self, key: str, value: float, timestamp_ms: int, step: int) -> None:
        self.received += 1
        k = self._keys.get(key)
        if k is None:
            fast = FAST.search(key) is not None
            k = self._keys[key] = _Key(self.fast_bucket_ms if fast else self.bucket_ms, COUNTER.search(key) is not None)
        point = (value, timestamp_ms, step)
        if k.shown is None and k.bucket is None:  # the metric's first point goes out at once: its chart
            k.bucket, k.last = step // k.bucket_ms, point  # starts where the run did, and a run cut short
            self._out(key, k, point)                       # (radt-ext killed) keeps it
            k.shown = point
            return
        bucket = step // k.bucket_ms
        if k.bucket is not None and bucket > k.bucket:
            self._close(key, k)
        if k.bucket is None or bucket > k.bucket:
            k.bucket = bucket
        k.points.append(point)  # a late point (an earlier bucket) joins the open one, at its own time
        k.last, k.stored_last = point, False

    def flush(self) -> None:
        """Close every bucket and store each metric's last point (the run's end)."""
        for key, k in self._keys.items():
            self._close(key, k)
            if k.last is not None and not k.stored_last:
                self._out(key, k, k.last)
            k.held = None

    # -- one bucket -------------------------------------------------------------------------
    def _out(self, key: str, k: _Key, p: Point) -> None:
        self.passed += 1
        if p is k.last:
            k.stored_last = True
        self.emit(key, p[0], p[1], p[2])

    def _close(self, key: str, k: _Key) -> None:
        points, k.points = k.points, []
        if not points:
            return
        if k.counter:  # each bucket's last point (its first went out when it came)
            self._out(key, k, points[-1])
            k.shown, k.held = points[-1], None
            return
        exact, shown, held = [], k.shown, k.held
        for p in points:
            if shown is not None and p[0] == shown[0]:
                if p[1] - shown[1] >= self.keepalive_ms:  # a keep-alive point
                    exact.append(p)
                    shown, held = p, None
                else:
                    held = p
                continue
            if held is not None:  # the last point of a flat stretch, so the chart steps at the change
                exact.append(held)
            exact.append(p)
            shown, held = p, None
        if len(exact) <= self.exact_points:
            for p in exact:
                self._out(key, k, p)
            k.shown, k.held = shown, held
            return
        held = k.held
        if held is not None and held[2] - k.shown[2] >= k.bucket_ms // 2:  # a flat stretch before this bucket
            self._out(key, k, held)  # ends here (a shorter one is not seen at the bucket's resolution)
        low = min(points, key=lambda p: p[0])
        high = max(points, key=lambda p: p[0])
        kept = [low] if low is high else sorted((low, high), key=lambda p: (p[1], p[2]))
        for p in kept:
            self._out(key, k, p)
        k.shown = kept[-1]
        after = points[next(i for i, p in enumerate(points) if p is kept[-1]) + 1:]
        # a flat stretch from the last stored point to the bucket's end: its end is held like any other
        k.held = after[-1] if after and all(p[0] == kept[-1][0] for p in after) else None


def shape(points) -> list[tuple[str, float, int, int]]:
    """The stored shape of finished timelines: (key, value, timestamp ms, step) points, each key's in time
    order, to the same points (a run's timelines written at its end, a run compacted later)."""
    kept: list[tuple[str, float, int, int]] = []
    shaper = StoreShaper(lambda k, v, t, s: kept.append((k, v, t, s)))
    for key, value, t, step in points:
        shaper.add(key, value, t, step)
    shaper.flush()
    return kept
