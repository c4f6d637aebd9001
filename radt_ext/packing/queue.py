"""A sweep spec as a queue of jobs: each variant of a single-workload group is one pooled job (the
planner, not the spec, decides the mode and the GPU; its hash and workload hash name the pool, so its
profile and resume hold whichever GPU ran it)."""
from __future__ import annotations

from dataclasses import replace

from radt_ext.packing.planner import Job
from radt_ext.sweep.plan import Variant, expand
from radt_ext.sweep.spec import SpecError, Sweep, one_line


def job_variants(sweep: Sweep) -> list[Variant]:
    if sweep.device_mode != "pool":
        raise SpecError(one_line(
            f"{sweep.source}: device_mode: {sweep.device_mode}: schedule: pack places each job once on the pool "
            "of devices; drop device_mode (or run the sweep without packing)"))
    if sweep.gpus_per_variant != 1:
        raise SpecError(one_line(
            f"{sweep.source}: gpus_per_variant: {sweep.gpus_per_variant}: schedule: pack shares one GPU among "
            "jobs; drop gpus_per_variant (or run the sweep without packing)"))
    for i, g in enumerate(sweep.groups):
        if len(g.workloads) != 1:
            raise SpecError(one_line(
                f"{sweep.source}: groups[{i}]: {g.label!r} has {len(g.workloads)} workloads; schedule: pack "
                "decides which jobs share a GPU: give each workload a group of its own"))
    return expand(replace(sweep, groups=[replace(g, modes=["exclusive"]) for g in sweep.groups]))


def job_name(v: Variant) -> str:
    return f"{v.workloads[0].name}-{v.index}"


def jobs_of(variants: list[Variant]) -> list[Job]:
    return [Job(job_name(v), v.workloads[0].key, v) for v in variants]
