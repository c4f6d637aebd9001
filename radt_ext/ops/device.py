"""The device a profile runs on: its energy meter (through listeners/) and the facts a predictor needs."""
from __future__ import annotations

import platform

import torch

CPU_REASON = "profiled on the CPU: the energy counter belongs to a GPU, so this profile has time only"


def open_meter(device: torch.device, energy: bool = True):
    """(meter or None, device facts, None or the one-line reason energy is unavailable)."""
    if device.type != "cuda":
        return None, {"gpu_name": "cpu", "cpu": platform.processor() or platform.machine(),
                      "cpu_threads": torch.get_num_threads()}, CPU_REASON
    props = torch.cuda.get_device_properties(device.index or 0)
    facts = {"gpu_name": props.name, "sm_count": props.multi_processor_count,
             "compute_capability": f"{props.major}.{props.minor}",
             "memory_total_mib": props.total_memory // (1024 * 1024), "cuda": torch.version.cuda}
    if not energy:
        return None, facts, "energy not measured (--no-energy)"
    from listeners.base import ListenerError
    from listeners.energy_counter import EnergyCounter

    try:
        meter = EnergyCounter()
    except (ListenerError, ImportError) as exc:
        return None, facts, str(exc)
    facts.update(meter.facts())
    facts["gpu_name"] = props.name
    return meter, facts, None
