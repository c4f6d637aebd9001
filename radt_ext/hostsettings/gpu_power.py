"""`gpu_power_limit_w`: the power limit of the variant's GPUs (NVML, where permitted)."""
from __future__ import annotations

from listeners.base import ListenerError
from radt_ext.hostsettings.base import Applied, Where, number

KEY = "gpu_power_limit_w"
SCOPE = "gpu"


def parse(raw) -> str:
    return f"{number(raw, 'watts'):g}"


def check(value: str, where: Where) -> str | None:
    from listeners import gpu_control

    if not where.gpus:
        return "the variant runs on cpu; a power limit needs a GPU"
    try:
        for gpu in where.gpus:
            gpu_control.check_power(gpu, float(value))
    except ListenerError as exc:
        return str(exc)
    return None


def apply(value: str, where: Where, save) -> Applied:
    from listeners import gpu_control

    now = [gpu_control.power(gpu) for gpu in where.gpus]
    before = {p["uuid"]: p["current_w"] for p in now}
    save({"limits_w": before})
    enforced = [gpu_control.set_power(uuid, float(value)) for uuid in before]
    return Applied(host=",".join(f"{w:g}" for w in enforced), note=f"on GPU {','.join(where.gpus)}",
                   record={"limits_w": before})


def restore(record: dict) -> str:
    from listeners import gpu_control

    for uuid, watts in record["limits_w"].items():
        gpu_control.set_power(uuid, watts)
    return ", ".join(f"{uuid[:12]}… {w:g} W" for uuid, w in record["limits_w"].items())
