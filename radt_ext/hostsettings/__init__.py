"""Host settings around one variant of a sweep: the `system:` block's CPUs (`cpus`), cgroup v2 CPU quota
(`cpu_quota_pct`), CPU frequency governor (`governor`), GPU power limit and locked clocks
(`gpu_power_limit_w`, `gpu_clocks_mhz`) and environment (`env`).

One module per kind of setting, each with the same four functions:

    parse(raw) -> str                  # a spec value → its canonical text (ValueError: one line why not)
    check(value, where) -> str | None  # can this host apply it? None, or the one-line reason
    apply(value, where, save) -> Applied   # `save(record)` first, then the change; what the host reports
    restore(record) -> str             # put back what `save` recorded; says what it put back

`around.py` applies a variant's settings in order and restores them in reverse; `restore.py` keeps the
restore file a watchdog applies when radt-ext is killed outright; `launch.py` is the small program that
pins a workload's process (and so its whole tree) to its CPUs and cgroup before it becomes the workload.

May import `listeners` (NVML's GPU settings) and `radt_ext.errors`; nothing of MLflow.
"""
from __future__ import annotations

from radt_ext.hostsettings import cpu_quota, cpus, env, governor, gpu_clocks, gpu_power

KINDS = {m.KEY: m for m in (cpus, cpu_quota, governor, gpu_power, gpu_clocks)}
ORDER = ("governor", "gpu_power_limit_w", "gpu_clocks_mhz", "cpu_quota_pct", "cpus")  # applied in this order
ENV_PREFIX = env.PREFIX  # a variant's env variables are keys `env.NAME`
TAG = "system."  # run tags: system.<key> (asked), .host (what the host reports), .status, .restored
OPTIONAL_KEYS = tuple(KINDS)


def kind(key: str):
    """The module of a setting's key (`env.NAME` is env's)."""
    return env if key.startswith(ENV_PREFIX) else KINDS[key]


def host_wide(keys) -> bool:
    """Whether a setting of these keys changes the whole host (the governor): variants that set it run
    one at a time."""
    return any(kind(k).SCOPE == "host" for k in keys)


def asked(tags: dict[str, str]) -> dict[str, str]:
    """The settings a run's tags say were asked ({key: value}), without what the host said of them."""
    out = {}
    for k, v in tags.items():
        key = k[len(TAG):]
        variable = key.startswith(ENV_PREFIX) and env.NAME.match(key[len(ENV_PREFIX):])
        if k.startswith(TAG) and (key in KINDS or variable):
            out[key] = v
    return out


def text(system: dict[str, str]) -> str:
    """A variant's settings in a line: `cpus=2 governor=performance OMP_NUM_THREADS=4`."""
    return " ".join(f"{k[len(ENV_PREFIX):] if k.startswith(ENV_PREFIX) else k}={v}" for k, v in system.items())


__all__ = ["KINDS", "ORDER", "TAG", "kind", "host_wide", "asked", "text"]
