"""`gpu_clocks_mhz`: the variant's GPUs' graphics clocks locked (NVML, where permitted): one clock
(`1410`) or a range (`"1200-1600"`). Restored by unlocking them: NVML cannot read which clocks were
locked before, so clocks another tool locked before the sweep come back unlocked."""
from __future__ import annotations

from listeners.base import ListenerError
from radt_ext.hostsettings.base import Applied, Where, number

KEY = "gpu_clocks_mhz"
SCOPE = "gpu"


def parse(raw) -> str:
    if isinstance(raw, str) and "-" in raw:
        low, _, high = raw.partition("-")
        if not (low.strip().isdigit() and high.strip().isdigit()) or int(low) > int(high) or int(low) < 1:
            raise ValueError(f"{raw!r} is not a clock range such as 1200-1600 (MHz)")
        return f"{int(low)}-{int(high)}"
    return str(int(number(raw, "MHz", whole=True)))


def bounds(value: str) -> tuple[int, int]:
    low, _, high = value.partition("-")
    return int(low), int(high or low)


def check(value: str, where: Where) -> str | None:
    from listeners import gpu_control

    if not where.gpus:
        return "the variant runs on cpu; locked clocks need a GPU"
    try:
        for gpu in where.gpus:
            gpu_control.check_clocks(gpu, *bounds(value))
    except ListenerError as exc:
        return str(exc)
    return None


def apply(value: str, where: Where, save) -> Applied:
    from listeners import gpu_control

    uuids = [gpu_control.power(gpu)["uuid"] for gpu in where.gpus]
    save({"locked": uuids})
    now = [gpu_control.lock_clocks(uuid, *bounds(value))[1] for uuid in uuids]
    return Applied(host=",".join(str(c) for c in now), note=f"on GPU {','.join(where.gpus)}; SM clock now (MHz)",
                   record={"locked": uuids})


def restore(record: dict) -> str:
    from listeners import gpu_control

    for uuid in record["locked"]:
        gpu_control.reset_clocks(uuid)
    return f"clocks unlocked on {', '.join(u[:12] + '…' for u in record['locked'])}"
