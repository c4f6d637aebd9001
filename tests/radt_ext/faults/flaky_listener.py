"""A test-only listener: reads fine a few times, then its sensor 'falls off' and every sample raises."""
from __future__ import annotations

from listeners.base import Listener

GOOD_SAMPLES = 5


class FlakyListener(Listener):
    name = "flaky"
    description = "test only: raises after a few samples"
    default_interval = 0.05

    def open(self) -> None:
        self.count = 0

    def read(self):
        self.count += 1
        if self.count > GOOD_SAMPLES:
            raise RuntimeError("sensor fell off the bus")
        return {"flaky_value_count": float(self.count)}
