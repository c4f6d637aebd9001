"""The shared shape of the listeners that read NVML (nvml, gpm, gpu_procs).

NVML is started in open() and shut down in close(), once each, also when open()
fails half-way (the monitor does not call close() after a failed open()).
Subclasses read their devices in `open_devices()`.
"""
from __future__ import annotations

from typing import Any

from listeners.base import Listener, ListenerError, Target
from listeners.devices import unavailable_reason
from listeners.nvml_backend import init_error, nvml


def start_nvml() -> Any:
    """nvmlInit on the backend in use, its failure as the one-line ListenerError; the backend."""
    nv = nvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise ListenerError(init_error(exc)) from None
    return nv


class NvmlListenerBase(Listener):
    def __init__(self, target: Target, interval: float | None = None):
        super().__init__(target, interval)
        self._nvml_started = False

    @classmethod
    def probe(cls, target: Target) -> str | None:
        return unavailable_reason(target.cuda_visible_devices)

    def open(self) -> None:
        nv = start_nvml()
        self._nvml_started = True
        try:
            self.open_devices(nv)
        except BaseException:
            self.close()
            raise

    def open_devices(self, nv: Any) -> None:
        pass

    def close(self) -> None:
        if self._nvml_started:
            self._nvml_started = False
            nvml().nvmlShutdown()
