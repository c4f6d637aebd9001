"""The one way to reach NVML: the real `pynvml` module, or a replay of a recorded trace.

Every NVML user calls `nvml()` at use time (never caches the module at import), so
setting RADT_EXT_NVML_REPLAY=<trace.json> before a run replays that trace everywhere.
The recorder swaps in its recording wrapper with `use()`.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator

REPLAY_ENV = "RADT_EXT_NVML_REPLAY"

_lock = threading.Lock()
_calls = threading.RLock()  # one NVML call at a time in this process (OneCallAtATime)
_real: Any = None
_override: Any = None
_replays: dict[str, Any] = {}
_held = False


def nvml() -> Any:
    """The pynvml module, or the Replay named by RADT_EXT_NVML_REPLAY (one per trace per process)."""
    if _override is not None:
        return _override
    path = os.environ.get(REPLAY_ENV)
    if path:
        with _lock:
            if path not in _replays:
                from listeners.replay import Replay

                _replays[path] = Replay(path)
            return _replays[path]
    global _real
    if _real is None:
        import pynvml

        _real = OneCallAtATime(pynvml)
    return _real


class OneCallAtATime:
    """A module whose `nvml*` functions are called one at a time in this process (everything else passes
    through). Listeners of several runs open and sample side by side in one process (a sweep runs a
    group on each GPU at once): NVML's init, shutdown and GPM calls from several threads at once are
    what a process that crashed with SIGSEGV, each time as two groups began, had in common. The calls
    take microseconds (the energy counter ~5 ms), so waiting for one another costs little."""

    def __init__(self, module: Any):
        self._module = module

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if name.startswith("nvml") and callable(value):
            def call(*args, __fn=value, **kwargs):
                with _calls:
                    return __fn(*args, **kwargs)

            call.__name__ = name
            self.__dict__[name] = call  # found by plain lookup from now on
            return call
        return value


def hold() -> None:
    """The real NVML started once more and kept so for this process (a replay: nothing). A start and a stop
    cost ~10 ms on an H200 host, the stop most of it, and a sweep checks its GPUs and probes its listeners
    with a few before its first job; NVML counts its starts, so with this one held theirs cost microseconds.
    Raises what nvmlInit raises."""
    global _held
    if _override is not None or os.environ.get(REPLAY_ENV):
        return
    with _lock:
        if not _held:
            nvml().nvmlInit()
            _held = True


def reset() -> None:
    """Forget cached replays so the next `nvml()` starts the trace from its beginning."""
    with _lock:
        _replays.clear()


@contextlib.contextmanager
def use(backend: Any) -> Iterator[Any]:
    """Route every `nvml()` to `backend` inside the block (the recorder's wrapper, a test's replay)."""
    global _override
    previous, _override = _override, backend
    try:
        yield backend
    finally:
        _override = previous


def is_replay() -> bool:
    return _override is not None or bool(os.environ.get(REPLAY_ENV))


def init_error(exc: BaseException) -> str:
    """One line saying why NVML could not start."""
    import pynvml

    if isinstance(exc, (pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded)):
        return f"NVML not found: no NVIDIA driver on this machine ({exc})"
    if isinstance(exc, pynvml.NVMLError_NoPermission):
        return f"NVML refused access: {exc}; run as a user allowed to read the GPU"
    if isinstance(exc, pynvml.NVMLError_LibRmVersionMismatch):
        return f"NVML cannot start: {exc}; the driver was updated, reboot or reload the module"
    return f"NVML cannot start: {type(exc).__name__}: {exc}"
