"""MIG for collocation: pin workloads to existing MIG devices; plan (and only on request apply)
the `nvidia-smi mig` commands that would create missing ones.

Existing devices are read from `nvidia-smi -L`. This module never enables MIG mode or
creates instances unless the caller passes allow_reconfigure=True (the CLI's
--allow-mig-reconfigure), and it never destroys instances.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from radt_ext.errors import UsageError

_GPU = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[^)]+)\)")
_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)")
_PROFILE = re.compile(r"^\d+g\.\d+gb(\+me)?$|^\d+c\.\d+g\.\d+gb$")


@dataclass
class MigDevice:
    gpu: str  # NVML index of the physical GPU
    gpu_uuid: str
    profile: str  # e.g. 3g.71gb
    uuid: str  # MIG-...


def _smi(*args: str) -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        raise UsageError("mode mig needs nvidia-smi on PATH (NVIDIA driver utilities)")
    done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        out = (done.stdout + done.stderr).strip()
        raise UsageError(f"nvidia-smi {' '.join(args)} failed (exit {done.returncode}): "
                         f"{out.splitlines()[0] if out else 'no output'}")
    return done.stdout


def gpus_and_migs() -> tuple[dict[str, str], list[MigDevice]]:
    """({GPU index: GPU uuid}, [existing MIG devices]) from `nvidia-smi -L`."""
    gpus: dict[str, str] = {}
    migs: list[MigDevice] = []
    current = None
    for line in _smi("-L").splitlines():
        if m := _GPU.match(line):
            current = m.group(1)
            gpus[current] = m.group(3)
        elif (m := _MIG.match(line)) and current is not None:
            migs.append(MigDevice(current, gpus[current], m.group(1), m.group(3)))
    return gpus, migs


def mig_enabled(gpu: str) -> bool:
    out = _smi("-i", gpu, "--query-gpu=mig.mode.current", "--format=csv,noheader").strip()
    return out.lower() == "enabled"


def gpu_index(device: str, gpus: dict[str, str]) -> str:
    if device in gpus:
        return device
    for index, uuid in gpus.items():
        if device.startswith("GPU-") and uuid.startswith(device):
            return index
    raise UsageError(f"mode mig: no GPU {device!r}; this machine has GPUs {', '.join(gpus) or 'none'}")


def plan(gpu: str, profiles: list[str], enabled: bool) -> list[list[str]]:
    """The nvidia-smi commands that would give `gpu` these extra instances."""
    cmds = []
    if not enabled:
        cmds.append(["nvidia-smi", "-i", gpu, "-mig", "1"])
    if profiles:
        cmds.append(["nvidia-smi", "mig", "-i", gpu, "-cgi", ",".join(profiles), "-C"])
    return cmds


def assign(requests: list[tuple[str, str, str]], allow_reconfigure: bool = False,
           echo=print) -> dict[str, MigDevice]:
    """requests: (workload name, device, profile or MIG-uuid) → {workload name: MIG device}.

    Missing instances: print the plan; apply it only with allow_reconfigure, else a UsageError.
    """
    for name, _device, want in requests:
        if not want.startswith("MIG-") and not _PROFILE.match(want):
            raise UsageError(f"workload {name!r}: {want!r} is neither a MIG profile like 3g.71gb nor a MIG-<uuid>")
    for attempt in (0, 1):
        gpus, migs = gpus_and_migs()
        taken: set[str] = set()
        out: dict[str, MigDevice] = {}
        missing: dict[str, list[str]] = {}
        for name, device, want in requests:
            if want.startswith("MIG-"):
                found = [m for m in migs if m.uuid.startswith(want)]
                if not found:
                    raise UsageError(f"workload {name!r}: no MIG device {want!r}; `nvidia-smi -L` lists them")
                out[name] = found[0]
                taken.add(found[0].uuid)
                continue
            gpu = gpu_index(device, gpus)
            free = [m for m in migs if m.gpu == gpu and m.profile == want and m.uuid not in taken]
            if free:
                out[name] = free[0]
                taken.add(free[0].uuid)
            else:
                missing.setdefault(gpu, []).append(want)
        if not missing:
            return out
        commands = [cmd for gpu, profiles in missing.items() for cmd in plan(gpu, profiles, mig_enabled(gpu))]
        text = "; ".join(" ".join(c) for c in commands)
        echo(f"MIG plan (instances missing): {text}")
        if not allow_reconfigure:
            raise UsageError(f"MIG instances {', '.join(p for ps in missing.values() for p in ps)} do not exist; "
                             f"the plan is: {text}; rerun with --allow-mig-reconfigure to apply it, or create "
                             "them yourself")
        if attempt:
            break
        for cmd in commands:
            _smi(*cmd[1:])
    raise UsageError("MIG instances are still missing after applying the plan; check `nvidia-smi -L`")
