"""GPU settings a sweep may change around a variant, through NVML: the power limit and locked graphics
clocks, and which CPUs sit near a GPU. Each function opens NVML and closes it again; what NVML refuses
is a ListenerError of one line that says why (permission, MIG, driver). Works on the replay backend
too (listeners/replay.py records the setter calls and answers "permitted or not" from the trace).

A GPU is named as in a sweep's devices: an NVML index or GPU-<uuid> (never a MIG device).
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

from listeners.base import ListenerError
from listeners.devices import GpuDevice, resolve, started

MIN_LOCKABLE_CC = (7, 0)  # locked clocks came with Volta


@contextlib.contextmanager
def _gpu(entry: str) -> Iterator[tuple[object, GpuDevice]]:
    with started() as nv:
        found = resolve(entry)
        if len(found) != 1:
            raise ListenerError(f"{entry!r} names {len(found)} GPUs; name one")
        if found[0].is_mig:
            raise ListenerError(f"MIG: {entry!r} is a MIG device; its GPU's settings are every instance's")
        yield nv, found[0]


def _refused(nv, exc, what: str) -> ListenerError:
    if isinstance(exc, nv.NVMLError_NoPermission):
        return ListenerError(f"permission: NVML refused to set the {what} (it needs root, as nvidia-smi does)")
    if isinstance(exc, nv.NVMLError_NotSupported):
        return ListenerError(f"driver: this GPU or driver cannot set the {what}")
    return ListenerError(f"NVML cannot set the {what}: {exc}")


def power(entry: str) -> dict:
    """{uuid, current_w, min_w, max_w, enforced_w} of the GPU's power limit."""
    with _gpu(entry) as (nv, gpu):
        try:
            low, high = nv.nvmlDeviceGetPowerManagementLimitConstraints(gpu.handle)
            current = nv.nvmlDeviceGetPowerManagementLimit(gpu.handle)
            enforced = nv.nvmlDeviceGetEnforcedPowerLimit(gpu.handle)
        except nv.NVMLError as exc:
            raise ListenerError(f"driver: NVML does not report the power limit of GPU {entry} ({exc})") from None
        return {"uuid": gpu.uuid, "current_w": current / 1000, "min_w": low / 1000, "max_w": high / 1000,
                "enforced_w": enforced / 1000}


def check_power(entry: str, watts: float) -> None:
    """A ListenerError where this GPU's power limit cannot be set to `watts`: out of its range, or not
    permitted (found by setting the current limit again, which changes nothing)."""
    now = power(entry)
    if not now["min_w"] <= watts <= now["max_w"]:
        raise ListenerError(f"{watts:g} W is outside GPU {entry}'s range {now['min_w']:g}..{now['max_w']:g} W")
    set_power(entry, now["current_w"])


def set_power(entry: str, watts: float) -> float:
    """Set the GPU's power limit; the limit the driver enforces afterwards (W)."""
    with _gpu(entry) as (nv, gpu):
        try:
            nv.nvmlDeviceSetPowerManagementLimit(gpu.handle, int(round(watts * 1000)))
            return nv.nvmlDeviceGetEnforcedPowerLimit(gpu.handle) / 1000
        except nv.NVMLError as exc:
            raise _refused(nv, exc, "power limit") from None


def check_clocks(entry: str, low: int, high: int) -> None:
    """A ListenerError where this GPU's graphics clocks cannot be locked to low..high MHz: MIG mode, a GPU
    older than Volta, a clock above its maximum, or not root (NVML's rule for locked clocks)."""
    with _gpu(entry) as (nv, gpu):
        if gpu.mig_enabled:
            raise ListenerError(f"MIG: GPU {entry} is in MIG mode, where its clocks cannot be locked")
        try:
            cc = tuple(nv.nvmlDeviceGetCudaComputeCapability(gpu.handle))
            top = nv.nvmlDeviceGetMaxClockInfo(gpu.handle, nv.NVML_CLOCK_GRAPHICS)
        except nv.NVMLError as exc:
            raise ListenerError(f"driver: NVML does not report GPU {entry}'s clocks ({exc})") from None
    if cc < MIN_LOCKABLE_CC:
        raise ListenerError(f"driver: GPU {entry} (compute capability {cc[0]}.{cc[1]}) cannot lock its clocks; "
                            "that needs Volta or newer")
    if high > top:
        raise ListenerError(f"{high} MHz is above GPU {entry}'s highest graphics clock, {top} MHz")
    if os.geteuid() != 0:
        raise ListenerError("permission: locking GPU clocks needs root (as nvidia-smi -lgc does)")


def lock_clocks(entry: str, low: int, high: int) -> tuple[str, int]:
    """Lock the GPU's graphics clocks to low..high MHz; (its UUID, its SM clock now, MHz)."""
    with _gpu(entry) as (nv, gpu):
        try:
            nv.nvmlDeviceSetGpuLockedClocks(gpu.handle, low, high)
            return gpu.uuid, nv.nvmlDeviceGetClockInfo(gpu.handle, nv.NVML_CLOCK_SM)
        except nv.NVMLError as exc:
            raise _refused(nv, exc, "locked clocks") from None


def reset_clocks(entry: str) -> None:
    """The GPU's graphics clocks unlocked (the driver's default)."""
    with _gpu(entry) as (nv, gpu):
        try:
            nv.nvmlDeviceResetGpuLockedClocks(gpu.handle)
        except nv.NVMLError as exc:
            raise _refused(nv, exc, "locked clocks") from None


def near_cpus(entry: str) -> set[int] | None:
    """The CPUs NVML says are near the GPU (its NUMA node's), or None where it does not say."""
    try:
        with _gpu(entry) as (nv, gpu):
            words = max(1, -(-(os.cpu_count() or 1) // 64))
            mask = nv.nvmlDeviceGetCpuAffinity(gpu.handle, words)
    except Exception:
        return None
    cpus = {w * 64 + bit for w, word in enumerate(mask) for bit in range(64) if int(word) >> bit & 1}
    return cpus or None
