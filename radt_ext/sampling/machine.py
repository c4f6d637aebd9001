"""Tags that describe the machine a run used: CPU, kernel, Python, frameworks, MPS.

GPU facts come from the GPU listeners' own `tags()` (radt_ext never talks to NVML).
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
from pathlib import Path

import psutil


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def mps_active() -> bool:
    """An MPS control daemon or server runs on this host (any user)."""
    for proc in psutil.process_iter(["name"]):
        if (proc.info.get("name") or "").startswith("nvidia-cuda-mps"):
            return True
    return False


def describe() -> dict[str, str]:
    tags = {
        "machine.hostname": socket.gethostname(),
        "machine.cpu_model": cpu_model(),
        "machine.cpu_logical_cores": str(psutil.cpu_count(logical=True)),
        "machine.cpu_physical_cores": str(psutil.cpu_count(logical=False) or ""),
        "machine.memory_gib": f"{psutil.virtual_memory().total / 2**30:.1f}",
        "machine.kernel": platform.release(),
        "machine.python": platform.python_version(),
        "machine.mps_active": str(mps_active()).lower(),
    }
    governor = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    if governor:
        tags["machine.cpu_governor"] = governor
    for dist, key in (
        ("torch", "machine.torch"),
        ("tensorflow", "machine.tensorflow"),
        ("tensorflow-cpu", "machine.tensorflow"),
        ("mlflow", "machine.mlflow"),
        ("radt-ext", "machine.radt_ext"),
        ("nvidia-ml-py", "machine.nvidia_ml_py"),
    ):
        version = _version(dist)
        if version:
            tags[key] = version
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
        tags["machine.cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return {k: v for k, v in tags.items() if v}
