"""What reaches the store: a metric's points that only repeat its value are held back.

A stretch of equal values is stored as its first point, a keep-alive point at least every
`keepalive_s` (so charts and the run's latest values stay fresh), and its last point: stored when
the value changes, just before the new value, or at `flush()` when the run ends. A line chart of
the stored points therefore draws the same steps as one of every point: a flat stretch then a
step, never a ramp. Only the store is thinned; summaries, kept series and workload routing see
every reading before this.

Metrics in `EXEMPT` keep every point:
- `gpu{i}_power_w` (the driver's power timeline; it changes every sample anyway) and
  `gpu{i}_energy_j` (the counter and its course between reads, a few points a second);
- the per-process samples (`gpu{i}_proc_sm_pct`, `gpu{i}_proc_mem_util_pct`) and a MIG
  instance's SM activity: a collocation energy split read back from the store takes each of
  those samples as covering only the driver tick before it, so a repeated sample left out would
  read as a gap there, not as a held value.
"""
from __future__ import annotations

import re
from typing import Callable

KEEPALIVE_S = 5.0
EXEMPT = re.compile(r"(?:^|/)gpu\d+_(?:power_w|energy_j|proc_sm_pct|proc_mem_util_pct|mig\d+_sm_active_pct)$")

Emit = Callable[[str, float, int, int], None]  # (key, value, timestamp ms, step)


class PointFilter:
    """Sits in front of one writer (`emit` is its `add`); used from one thread at a time."""

    def __init__(self, emit: Emit, keepalive_s: float = KEEPALIVE_S, exempt: re.Pattern | None = EXEMPT):
        self.emit = emit
        self.keepalive_ms = int(keepalive_s * 1000)
        self.exempt = exempt
        # key -> [value, timestamp ms of its last stored point, held point (value, ms, step) or None];
        # None: an exempt key
        self._state: dict[str, list | None] = {}
        self.received = 0
        self.passed = 0

    @property
    def held_back(self) -> int:
        """Points not stored (after flush(): each repeated the one before)."""
        return self.received - self.passed

    def add(self, key: str, value: float, timestamp_ms: int, step: int) -> None:
        self.received += 1
        state = self._state.get(key, False)
        if state is None:
            self.passed += 1
            self.emit(key, value, timestamp_ms, step)
            return
        if state is False:  # first point of this key
            exempt = self.exempt is not None and self.exempt.search(key) is not None
            self._state[key] = None if exempt else [value, timestamp_ms, None]
            self.passed += 1
            self.emit(key, value, timestamp_ms, step)
            return
        if value == state[0]:
            if timestamp_ms - state[1] >= self.keepalive_ms:
                state[1], state[2] = timestamp_ms, None
                self.passed += 1
                self.emit(key, value, timestamp_ms, step)
            else:
                state[2] = (value, timestamp_ms, step)
            return
        held = state[2]
        if held is not None:  # the last point of the flat stretch, so the chart steps at the change
            self.passed += 1
            self.emit(key, *held)
        state[0], state[1], state[2] = value, timestamp_ms, None
        self.passed += 1
        self.emit(key, value, timestamp_ms, step)

    def flush(self) -> None:
        """Store the last point of every stretch still held (the run's end)."""
        for key, state in self._state.items():
            if state is not None and state[2] is not None:
                held, state[2] = state[2], None
                state[1] = held[1]
                self.passed += 1
                self.emit(key, *held)
