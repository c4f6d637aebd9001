"""What a Slurm job of a sweep runs on its node: one variant's group, logging to the tracking server.

submitit pickles `run` with its variant and calls it on the node with the submitting interpreter.
The job ends FAILED in Slurm when the variant's group did not finish, so `sacct` agrees with the store.
"""
from __future__ import annotations

import os
import signal

from radt_ext.store.client import connect
from radt_ext.run.signals import SignalRelay
from radt_ext.sweep.plan import CPU, Variant
from radt_ext.sweep.variant_run import run_variant


class VariantNotFinished(RuntimeError):
    pass


def allocated(devices: list[str], visible: str | None) -> dict[str, str]:
    """{spec device: GPU}: in a job Slurm gave GPUs to (CUDA_VISIBLE_DEVICES set), spec index i is the
    job's i-th GPU; elsewhere devices stay as written."""
    if not visible:
        return {}
    gpus = [g.strip() for g in visible.split(",") if g.strip()]
    out = {}
    for d in devices:
        if d != CPU and d.isdigit() and int(d) < len(gpus):
            out[d] = gpus[int(d)]
    return out


def pooled_devices(v: Variant, visible: str | None) -> list[str]:
    """Where a pooled variant runs in a job: the first `gpus` GPUs Slurm gave it (else of its pool)."""
    if CPU in v.pool:
        return [CPU]
    gpus = [g.strip() for g in (visible or "").split(",") if g.strip()] or list(v.pool)
    return gpus[:v.gpus]


def tags() -> dict[str, str]:
    env = os.environ
    job = env.get("SLURM_JOB_ID")
    if env.get("SLURM_ARRAY_JOB_ID"):  # an array task: the id squeue and jobs.json use, "123_4"
        job = f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID')}"
    found = {"slurm.job_id": job, "slurm.node": env.get("SLURMD_NODENAME"),
             "slurm.partition": env.get("SLURM_JOB_PARTITION")}
    return {k: v for k, v in found.items() if v}


def run(v: Variant, uri: str, supersedes: str | None = None) -> dict[str, str]:
    """Slurm's warning before the time limit (SIGUSR2, 90 s ahead as submitit asks) stops the group like
    SIGTERM does: its runs end KILLED while the job can still write them, and a re-run submits it again."""
    client = connect(uri)
    device_map = allocated([v.device], os.environ.get("CUDA_VISIBLE_DEVICES"))
    devices = pooled_devices(v, os.environ.get("CUDA_VISIBLE_DEVICES")) if v.pool else None
    model = None
    if devices and CPU not in devices:
        from listeners.devices import identities

        models = {name for _uuid, name in identities(devices).values()}
        model = models.pop() if len(models) == 1 else None
    elif devices:
        model = CPU
    runners, warned = [], []

    def start(runner) -> bool:
        runners.append(runner)
        return not warned

    def time_is_up(signum: int) -> None:
        warned.append(signum)
        for runner in runners:
            runner.stop(signum)

    with SignalRelay(time_is_up, signals=(signal.SIGUSR2,)):
        outcome = run_variant(client, v, uri, supersedes, echo=lambda m: print(m, flush=True), tags=tags(),
                              device_map=device_map, start=start, devices=devices, model=model)
    if outcome is None:
        raise VariantNotFinished(f"[{v.index}] {v.title}: the time limit came before it started")
    if outcome.status != "FINISHED":
        raise VariantNotFinished(f"[{v.index}] {v.title}: {outcome.status} (run {outcome.run_id}, "
                                 f"exit code {outcome.exit_code})")
    return {"status": outcome.status, "run_id": outcome.run_id or ""}
