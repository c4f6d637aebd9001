"""A pool of devices: a variant asks for N of them, gets the first N free (in the order the spec
lists them) once they are, and gives them back when it ends.

    pool = DevicePool(["0", "1"])
    devices = pool.acquire(1)          # blocks until one is free; None once `stopping()` says so
    ...                                # run the variant on them
    pool.release(devices)

The one interface the sweep's executors schedule through (a lane per device keeps its own order).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

WAKE_S = 0.2  # how often a waiting acquire looks at `stopping`


class DevicePool:
    def __init__(self, devices: Iterable[str], models: dict[str, str] | None = None):
        self.devices = list(dict.fromkeys(devices))
        self.models = dict(models or {})  # device -> GPU model name, where known
        self._free = set(self.devices)
        self._cond = threading.Condition()

    def acquire(self, n: int = 1, among: Iterable[str] | None = None,
                stopping: Callable[[], bool] = lambda: False) -> list[str] | None:
        """The first `n` free devices (of `among`, default all), waiting until they are free;
        None when `stopping()` turns true first."""
        allowed = [d for d in self.devices if among is None or d in set(among)]
        if n > len(allowed):
            raise ValueError(f"{n} devices asked of a pool of {len(allowed)} ({', '.join(allowed)})")
        with self._cond:
            while True:
                if stopping():
                    return None
                free = [d for d in allowed if d in self._free]
                if len(free) >= n:
                    got = free[:n]
                    self._free.difference_update(got)
                    return got
                self._cond.wait(WAKE_S)

    def release(self, devices: Iterable[str]) -> None:
        with self._cond:
            self._free.update(d for d in devices if d in self.devices)
            self._cond.notify_all()

    def model(self, devices: Iterable[str]) -> str | None:
        """The GPU model of these devices ("cpu" for cpu); None when unknown or mixed."""
        names = {("cpu" if d == "cpu" else self.models.get(d)) for d in devices}
        return names.pop() if len(names) == 1 and None not in names else None

    @property
    def free(self) -> list[str]:
        with self._cond:
            return [d for d in self.devices if d in self._free]
