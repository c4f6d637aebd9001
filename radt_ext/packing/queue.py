"""A sweep spec as a queue of jobs: each variant of a single-workload group is one job, expanded once
(the planner, not the spec, decides the mode and the GPU)."""
from __future__ import annotations

from dataclasses import replace

from radt_ext.packing.planner import Job
from radt_ext.sweep.plan import Variant, expand
from radt_ext.sweep.spec import SpecError, Sweep, one_line


def job_variants(sweep: Sweep) -> list[Variant]:
    for i, g in enumerate(sweep.groups):
        if len(g.workloads) != 1:
            raise SpecError(one_line(
                f"{sweep.source}: groups[{i}]: {g.label!r} has {len(g.workloads)} workloads; schedule: pack "
                "decides which jobs share a GPU: give each workload a group of its own"))
    jobs = replace(sweep, devices=sweep.devices[:1], groups=[replace(g, modes=["exclusive"]) for g in sweep.groups])
    return expand(jobs)


def job_name(v: Variant) -> str:
    return f"{v.workloads[0].name}-{v.index}"


def jobs_of(variants: list[Variant]) -> list[Job]:
    return [Job(job_name(v), v.workloads[0].key, v) for v in variants]
