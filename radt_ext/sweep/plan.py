"""A validated sweep → its variants: group × mode × parameter setting × repeat (× device with
`device_mode: each`).

A group's `system:` settings multiply its variants like its grid does (a variant's `system`).
Each variant has a content hash (`sweep.hash` tag on its parent run) over everything that
decides what runs; a re-run skips variants whose hash already has a FINISHED run. A pooled
variant's device is chosen when it is dispatched, so its hash names the pool, not a GPU.
Exclusive variants come first, so collocated ones find their baselines.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from radt_ext import hostsettings
from radt_ext.collocation.modes import CPU, Group, Workload
from radt_ext.sweep.spec import SpecError, Sweep, one_line

POOL = "pool"  # a pooled variant's device in the plan (and its hash): whichever device is free


def pool_place(gpus: int) -> str:
    return POOL if gpus == 1 else f"{POOL}:{gpus}"


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass
class PlannedWorkload:
    name: str  # unique inside the group
    source: str  # the workload definition it came from
    command: list[str]
    device: str
    params: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    mps_thread_percentage: int | None = None
    mps_pinned_mem_limit: str | None = None
    mig: str | None = None
    cwd: str | None = None
    system: dict[str, str] = field(default_factory=dict)  # the variant's host settings

    @property
    def key(self) -> str:
        """What makes two workloads the same job (for exclusive baselines): command, device, env, host settings."""
        what = {"command": self.command, "device": self.device, "env": self.env}
        if self.system:  # only where set: the jobs of sweeps without host settings keep their keys
            what["system"] = self.system
        return digest(what)[:16]

    def workload(self, mode: str, name: str | None = None, device: str | None = None, tags: dict | None = None,
                 thread_percentage: int | None = None) -> Workload:
        """The collocation workload that runs it in `mode` (its own name and device unless given; the
        MPS thread percentage its own, else `thread_percentage`)."""
        return Workload(name or self.name, list(self.command), device=device or self.device, params=dict(self.params),
                        env=dict(self.env), tags={"sweep.workload_hash": self.key, "sweep.workload": self.source,
                                                  **(tags or {})},
                        mps_thread_percentage=(self.mps_thread_percentage or thread_percentage) if mode == "mps" else None,
                        mps_pinned_mem_limit=self.mps_pinned_mem_limit if mode == "mps" else None,
                        mig=self.mig if mode == "mig" else None, cwd=self.cwd)


@dataclass
class Variant:
    index: int
    sweep_id: str
    experiment: str
    label: str  # group label
    mode: str
    device: str
    setting: dict[str, str]  # the grid/random parameter values of this variant
    repeat: int
    workloads: list[PlannedWorkload]
    listeners: str | None = None
    child_listeners: str | None = None
    interval: float | None = None
    extra_tags: dict[str, str] = field(default_factory=dict)
    pool: list[str] = field(default_factory=list)  # the devices a pooled variant may run on; [] : `device` fixed
    gpus: int = 1  # devices a pooled variant takes
    system: dict[str, str] = field(default_factory=dict)  # host settings ({key: value}; radt_ext.hostsettings)
    optional: tuple[str, ...] = ()  # those of them skipped, not refused, where this host cannot apply them
    measure_s: float | None = None  # a measurement group: stopped after this long side by side (GroupDef)

    def _content(self) -> dict:
        content = {
            "mode": self.mode, "device": self.device, "repeat": self.repeat,
            "listeners": self.listeners, "child_listeners": self.child_listeners, "interval": self.interval,
            "workloads": [{"name": w.name, "command": w.command, "env": w.env, "mps": [w.mps_thread_percentage,
                           w.mps_pinned_mem_limit], "mig": w.mig} for w in self.workloads],
        }
        if self.system:  # only where set: variants of sweeps without host settings keep their hashes
            content["system"] = self.system
        if self.measure_s is not None:  # so too a measurement's window
            content["measure_s"] = self.measure_s
        return content

    @property
    def hash(self) -> str:
        return digest(self._content())[:24]

    @property
    def setting_hash(self) -> str:
        """The same content but the repeat: the variant's repeats share it (tag `sweep.setting`)."""
        content = self._content()
        del content["repeat"]
        return digest(content)[:24]

    @property
    def title(self) -> str:
        return self.title_on()

    def title_on(self, devices: list[str] | None = None) -> str:
        """What it is and where: the devices it was given, else its device (a pool of one: that one)."""
        where = ",".join(devices) if devices else self.pool[0] if self.pool and len(self.pool) == 1 else self.device
        setting = " ".join([*(f"{k}={v}" for k, v in self.setting.items()), *([hostsettings.text(self.system)]
                                                                              if self.system else [])])
        rep = f" #{self.repeat}" if self.repeat else ""
        return f"{self.mode} {self.label} on {where}{(' ' + setting) if setting else ''}{rep}"

    def group(self, baselines: dict[str, tuple[str, float]] | None = None, tracking_uri: str | None = None,
              devices: list[str] | None = None) -> Group:
        tags = {"sweep.id": self.sweep_id, "sweep.hash": self.hash, "sweep.setting": self.setting_hash,
                "sweep.group": self.label, "sweep.repeat": str(self.repeat), **self.extra_tags}
        swept = {f"sweep.param.{k}": v for k, v in self.setting.items()}  # on every run of it: the view's one column
        tags.update(swept)
        asked = {f"{hostsettings.TAG}{k}": v for k, v in self.system.items()}
        workloads = [w.workload(self.mode) for w in self.workloads]
        return Group(mode=self.mode, workloads=workloads, experiment_name=self.experiment,
                     run_name=f"{self.sweep_id}:{self.title_on(devices)}", listeners=self.listeners,
                     child_listeners=self.child_listeners, interval=self.interval, tags={**tags, **asked},
                     child_tags={"sweep.id": self.sweep_id, **swept, **asked}, tracking_uri=tracking_uri,
                     baselines=baselines or {}, measure_s=self.measure_s)


def expand(sweep: Sweep) -> list[Variant]:
    variants: list[Variant] = []
    for g in sweep.groups:
        counts = {w: g.workloads.count(w) for w in g.workloads}
        places = sweep.devices if sweep.device_mode == "each" else [pool_place(sweep.gpus_per_variant)]
        pool = list(sweep.devices) if sweep.device_mode != "each" else []
        for mode in g.modes:
            for device in places:
                for setting, system in ((a, s) for a in g.assignments for s in g.systems):
                    for repeat in range(sweep.repeats):
                        seen: dict[str, int] = {}
                        planned = []
                        for w in g.workloads:
                            d = sweep.workloads[w]
                            n = seen[w] = seen.get(w, -1) + 1
                            params = {**d.params, **{k: v for k, v in setting.items() if k in d.params}}
                            planned.append(PlannedWorkload(
                                name=f"{w}_{n}" if counts[w] > 1 else w, source=w,
                                command=d.render(params), device=device,
                                params=params, env=dict(d.env), mps_thread_percentage=d.mps_thread_percentage,
                                mps_pinned_mem_limit=d.mps_pinned_mem_limit, mig=d.mig, system=dict(system)))
                        variants.append(Variant(0, sweep.name, sweep.experiment, g.label, mode, device,
                                                dict(setting), repeat, planned, sweep.listeners,
                                                sweep.child_listeners, sweep.interval, pool=pool,
                                                gpus=sweep.gpus_per_variant if pool else 1, system=dict(system),
                                                optional=g.optional, measure_s=g.measure_s))
    _no_twins(sweep.source, variants)
    return order(variants)


def _no_twins(source: str, variants: list[Variant]) -> None:
    """Two variants with one content hash would run the same thing twice, and a resume could not tell
    which of them a FINISHED run stands for: a one-line SpecError saying why they are the same."""
    seen: dict[str, Variant] = {}
    for v in variants:
        a = seen.setdefault(v.hash, v)
        if a is v:
            continue
        unused = sorted(k for k in set(a.setting) | set(v.setting) if a.setting.get(k) != v.setting.get(k))
        if unused:
            what = (f"{a.title} and {v.title} run the same commands: no command of group {v.label!r} uses "
                    f"{', '.join(unused)}; put {{{unused[0]}}} in a command or take it out of grid/random")
        elif a.label == v.label:
            what = f"group {v.label!r} is given twice for mode {v.mode}; list each group once"
        else:
            what = (f"groups {a.label!r} and {v.label!r} run the same commands in mode {v.mode}; "
                    "drop one of them (use repeats for more runs)")
        raise SpecError(one_line(f"{source}: groups: {what}"))


def order(variants: list[Variant]) -> list[Variant]:
    ordered = [v for v in variants if v.mode == "exclusive"] + [v for v in variants if v.mode != "exclusive"]
    for i, v in enumerate(ordered):
        v.index = i
    return ordered



__all__ = ["Variant", "PlannedWorkload", "expand", "order", "digest", "CPU", "POOL"]
