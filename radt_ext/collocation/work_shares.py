"""Each workload's share of a shared GPU from its own progress: who held the GPU, told by the work it did.

Pure functions: no NVML, no MLflow. Where every workload sharing a GPU by time-slicing (or under MPS)
reports its progress (`radt_ext.log_progress`), its own clock says when it worked (its first and last
progress mark: its busy span) and how fast. A workload's rate while others share the GPU, divided by its
rate alone, is the fraction of the GPU it held then: time-slicing hands the GPU to one context at a time,
so a job that held it half the time does half its alone work per second. The active energy of a stretch
where several workloads are busy is split in proportion to those fractions:

- **One kind.** Workloads of the same kind (the same command) run at the same rate alone, so the rate
  cancels: their shares follow the work each did in the stretch.
- **Several kinds.** A kind's rate alone is measured where one of its workloads was the only one busy
  for at least one of its own progress intervals (shorter stretches say only what the records around
  them interpolate). A workload whose kind has no such stretch takes what the others leave of the GPU
  (1 − their fractions), shared by work within its kind; where they leave nothing, or no kind's rate
  alone is known, the work says nothing and `split` answers None (the caller falls back to the driver's
  ticks).
- **Alone.** A workload whose span holds no other's gets all of the active energy.

The progress is each workload's cumulative count of samples (or of any one counter) at its records; the
work inside a stretch is read linearly between records.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

Points = list[tuple[float, float]]


@dataclass
class Progress:
    name: str
    kind: str  # workloads of the same kind run at the same rate alone (the same command)
    points: Points  # (t, cumulative work) at the workload's progress records

    @property
    def span(self) -> tuple[float, float]:
        return self.points[0][0], self.points[-1][0]

    def at(self, t: float) -> float:
        times = [p[0] for p in self.points]
        i = bisect.bisect_right(times, t) - 1
        if i < 0:
            return self.points[0][1]
        if i + 1 >= len(self.points):
            return self.points[-1][1]
        (t0, v0), (t1, v1) = self.points[i], self.points[i + 1]
        return v0 + (v1 - v0) * (t - t0) / (t1 - t0) if t1 > t0 else v1

    def work(self, a: float, b: float) -> float:
        return max(0.0, self.at(b) - self.at(a))

    def record_spacing(self) -> float:
        gaps = sorted(b[0] - a[0] for a, b in zip(self.points, self.points[1:]) if b[0] > a[0])
        return gaps[len(gaps) // 2] if gaps else float("inf")


def usable(points: Points) -> bool:
    """At least two records with time between them and some work done."""
    return len(points) > 1 and points[-1][0] > points[0][0] and points[-1][1] > points[0][1]


class WorkShares:
    """Busy spans and shares from the workloads' progress (see the module's docstring)."""

    def __init__(self, progress: list[Progress]):
        self.progress = {p.name: p for p in progress if usable(p.points)}
        edges = sorted({t for p in self.progress.values() for t in p.span})
        self.pieces: list[tuple[float, float, frozenset]] = []
        for a, b in zip(edges, edges[1:]):
            mid = (a + b) / 2
            busy = frozenset(n for n, p in self.progress.items() if p.span[0] <= mid < p.span[1])
            if busy:
                self.pieces.append((a, b, busy))
        self.alone_rate: dict[str, float] = {}  # kind -> work per second alone
        solo: dict[str, list[float]] = {}
        for a, b, busy in self.pieces:
            if len(busy) == 1:
                (n,) = busy
                p = self.progress[n]
                if b - a >= p.record_spacing():
                    s = solo.setdefault(p.kind, [0.0, 0.0])
                    s[0] += p.work(a, b)
                    s[1] += b - a
        self.alone_rate = {k: w / s for k, (w, s) in solo.items() if s > 0 and w > 0}
        self._cache: dict[tuple[float, float], dict[str, float] | None] = {}

    def covers(self, names) -> bool:
        """Whether every one of these workloads reported progress."""
        return all(n in self.progress for n in names)

    def busy_at(self, t: float) -> frozenset:
        i = bisect.bisect_right([a for a, _, _ in self.pieces], t) - 1
        if i >= 0:
            a, b, busy = self.pieces[i]
            if a <= t < b:
                return busy
        return frozenset()

    def piece_at(self, t: float) -> tuple[float, float, frozenset] | None:
        for piece in self.pieces:
            if piece[0] <= t < piece[1]:
                return piece
        return None

    def split(self, t: float) -> dict[str, float] | None:
        """{name: weight} (summing to 1) of the active energy at t among the workloads busy by their own
        progress; {} where none is; None where their work cannot tell."""
        piece = self.piece_at(t)
        if piece is None:
            return {}
        a, b, busy = piece
        if (a, b) in self._cache:
            return self._cache[(a, b)]
        out = self._weigh(a, b, busy)
        self._cache[(a, b)] = out
        return out

    def _weigh(self, a: float, b: float, busy: frozenset) -> dict[str, float] | None:
        if len(busy) == 1:
            return {n: 1.0 for n in busy}
        dt = b - a
        work = {n: self.progress[n].work(a, b) for n in busy}
        kinds: dict[str, list[str]] = {}
        for n in sorted(busy):
            kinds.setdefault(self.progress[n].kind, []).append(n)
        if len(kinds) == 1:
            total = sum(work.values())
            return {n: w / total for n, w in work.items()} if total > 0 else None
        held = {n: work[n] / (self.alone_rate[self.progress[n].kind] * dt)
                for n in busy if self.progress[n].kind in self.alone_rate}
        if not held:
            return None
        unknown = {k: names for k, names in kinds.items() if k not in self.alone_rate}
        if unknown:  # the scheduler's fairness: a context with work gets the slices the others get
            fair = sum(held.values()) / len(held)
            for names in unknown.values():
                total = sum(work[n] for n in names)
                for n in names:
                    held[n] = fair * len(names) * (work[n] / total if total > 0 else 1.0 / len(names))
        total = sum(held.values())
        return {n: v / total for n, v in held.items()} if total > 0 else None
