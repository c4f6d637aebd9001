"""Where a recipe's time goes before its first training step: the process start (as the OS
recorded it, so the interpreter's own start and the imports count), then one mark per phase.

The split is logged on the recipe's run as `startup_<phase>_s` metrics, `startup_to_first_step_s`
(process start to the end of the first optimizer step) and the tag `startup.split`.
"""
from __future__ import annotations

import time


def process_start() -> float:
    """Epoch seconds at which this process was created; now where the OS does not say."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:  # no psutil, or no access to the process table
        return time.time()


class Startup:
    def __init__(self, start: float | None = None):
        self.start = process_start() if start is None else start
        self.last = self.start
        self.phases: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        """The phase that has just ended, timed since the previous mark."""
        now = time.time()
        self.phases[phase] = max(0.0, now - self.last)
        self.last = now

    @property
    def total_s(self) -> float:
        return self.last - self.start

    def metrics(self) -> dict[str, float]:
        out = {f"startup_{phase}_s": round(s, 3) for phase, s in self.phases.items()}
        out["startup_to_first_step_s"] = round(self.total_s, 3)
        return out

    def text(self) -> str:
        parts = ", ".join(f"{phase} {s:.2f} s" for phase, s in self.phases.items())
        return f"first step {self.total_s:.2f} s after the process started ({parts})"
