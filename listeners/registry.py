"""Names → listener classes, and the `--listeners` spec parser.

`radt-ext listeners` and `--listeners` read this one table. Modules are imported
on first use so a listener whose module fails to import is reported as
unavailable with the reason instead of breaking the others.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from listeners.base import Listener, ListenerError, Target

# name -> "module:Class"
LISTENERS: dict[str, str] = {
    "nvml": "listeners.nvml:NvmlListener",
    "gpm": "listeners.gpm:GpmListener",
    "smi": "listeners.smi:SmiListener",
    "dcgm": "listeners.dcgm:DcgmListener",
    "top": "listeners.top:TopListener",
    "perf": "listeners.perf:PerfListener",
    "rapl": "listeners.rapl:RaplListener",
    "gpu_procs": "listeners.gpu_procs:GpuProcsListener",
}


class SpecError(ValueError):
    """A `--listeners` spec that cannot be used; the message is one line for users."""


def load(name: str) -> type[Listener]:
    if name not in LISTENERS:
        raise SpecError(
            f"unknown listener {name!r}; choose from {', '.join(LISTENERS)} "
            "(run `radt-ext listeners` to see which work here)"
        )
    module, cls = LISTENERS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def availability(name: str, target: Target | None = None) -> str | None:
    """None when usable here, else the one-line reason."""
    try:
        cls = load(name)
    except SpecError:
        raise  # an unknown name is bad input, not an unavailable listener
    except Exception as exc:  # an import failure is a reason, not a crash
        return f"cannot import: {exc}".splitlines()[0]
    try:
        return cls.probe(target or Target())
    except Exception as exc:
        return f"probe failed: {type(exc).__name__}: {exc}".splitlines()[0]


@dataclass(frozen=True)
class Selection:
    name: str
    interval: float | None  # None: the listener's default, or the global --interval


def parse_spec(spec: str | None) -> list[Selection] | None:
    """Parse `nvml,gpm:0.05,top`. None or "" or "all" means every available listener."""
    if spec is None or spec.strip() in ("", "all"):
        return None
    out: list[Selection] = []
    seen: set[str] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            raise SpecError(f"empty entry in listener list {spec!r}; write e.g. nvml,gpm:0.05,top")
        name, _, interval_text = part.partition(":")
        name = name.strip()
        if name not in LISTENERS:
            load(name)  # raises the one-line SpecError
        if name in seen:
            raise SpecError(f"listener {name!r} named twice in {spec!r}")
        seen.add(name)
        interval = None
        if interval_text:
            interval = parse_interval(interval_text, where=f"listener {name!r}")
        out.append(Selection(name, interval))
    return out


def parse_interval(text: str, where: str = "interval") -> float:
    try:
        value = float(text)
    except ValueError:
        raise SpecError(f"{where}: interval {text!r} is not a number of seconds; write e.g. 0.1") from None
    if not (0.001 <= value <= 3600):
        raise SpecError(f"{where}: interval {value} s is out of range; use 0.001 to 3600 seconds")
    return value


def smi_gpu_indices() -> list[str]:
    """The indices of the GPUs `nvidia-smi -L` names ("0", "1", ...; asked only where NVML does not start)."""
    import shutil
    import subprocess

    from listeners import smi

    tool = shutil.which("nvidia-smi")
    if tool is None:
        return []
    try:
        out = smi._run([tool, "-L"])
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    gpus, _ = smi.parse_gpu_list(out.stdout)
    return [str(i) for i in sorted(gpus.values())]


def check_target(target: Target, require_gpu: bool = False) -> None:
    """Raise ListenerError (one line) when CUDA_VISIBLE_DEVICES names a GPU that does not exist.

    Checked where NVML starts; elsewhere the GPU listeners are simply unavailable, unless
    `require_gpu` (a GPU named as the device to run on): then a machine where NVML does not start
    and `nvidia-smi -L` lists no GPU has no such GPU either.
    """
    if not target.cuda_visible_devices:
        return
    try:
        from listeners import devices
        from listeners.nvml_backend import hold, nvml

        nv = nvml()
        nv.nvmlInit()
        hold()  # the probes and listeners that follow start NVML again: held, that costs them nothing
    except Exception as exc:
        if require_gpu and not smi_gpu_indices():
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ListenerError(f"this machine has no GPU (NVML does not start: {why}; nvidia-smi lists none)") \
                from None
        return
    try:
        devices.resolve(target.cuda_visible_devices)
    except nv.NVMLError:
        return  # NVML cannot list the GPUs: the GPU listeners' probes say why
    finally:
        nv.nvmlShutdown()
