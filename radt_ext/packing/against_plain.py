"""A packed pass against the plain pass of the same jobs (`radt-ext sweep FILE --plain`, radt_ext/sweep/
plain_store.py): the newest FINISHED one that ran every job of the queue. Its makespan against the plain
makespan, each job's wall against its plain wall (the worst named); on each job's run `summary/plain_wall_s`
and `summary/slowdown_vs_plain`, and on the sweep's report run `pack/makespan_s`, `pack/plain_makespan_s`,
`pack/makespan_vs_plain` (tag `pack.plain_run_id`). No plain pass in the store: nothing.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass

from radt_ext.sweep.plain_store import PlainPass, newest

PLAIN_WALL = "summary/plain_wall_s"
SLOWDOWN = "summary/slowdown_vs_plain"
PLAIN_RUN_TAG = "pack.plain_run_id"


def job_of(v) -> tuple[str, str]:
    """A queue job as the plain pass knows it: its workload's name in the spec and its workload hash."""
    return v.workloads[0].source, v.workloads[0].key


def find(client, experiment: str, variants) -> PlainPass | None:
    return newest(client, experiment, {job_of(v) for v in variants})


@dataclass
class Ran:
    name: str
    job: tuple[str, str]  # job_of its variant
    run_id: str  # the job's own run
    started: float
    ended: float
    wall_s: float


def _walls(pairs: list[tuple[str, float, float]]) -> str:
    """Each job's wall over its plain wall: the median and the worst, named."""
    ratios = [(wall / plain, name) for name, wall, plain in pairs if plain > 0]
    if not ratios:
        return ""
    worst = max(ratios)
    return (f"each job's wall against its plain wall: median {statistics.median(r for r, _ in ratios):.2f}, "
            f"worst {worst[1]} {worst[0]:.2f}")


def _same_jobs(keys: list[tuple[str, str]], plain: PlainPass) -> bool:
    """The makespans compare only where both passes ran the same jobs, each once."""
    return len(keys) == len(set(keys)) == plain.jobs and set(keys) == set(plain.walls)


def planned(plan, plain: PlainPass) -> str:
    """The dry run's figures against the plain pass (makespan where the plan holds the same jobs)."""
    line = f"against the plain pass (run {plain.run_id[:12]}, {plain.jobs} jobs)"
    jobs = [(d, i, j) for d in plan.decisions for i, j in enumerate(d.jobs)]
    packed = plan.predicted_makespan_s()
    if packed is not None and _same_jobs([job_of(j.ref) for _, _, j in jobs], plain):
        line += (f": predicted makespan {packed:.1f} s against {plain.makespan_s:.1f} s plain "
                 f"(ratio {packed / plain.makespan_s:.2f})" if plain.makespan_s > 0 else "")
    walls = _walls([(j.name, d.wall_s(i), plain.wall(job_of(j.ref))) for d, i, j in jobs
                    if d.wall_s(i) is not None and plain.wall(job_of(j.ref)) is not None])
    return line + (f"; predicted {walls}" if walls else "")


def log_job(client, plain: PlainPass | None, ran: Ran) -> None:
    """The job's plain wall and its wall over it, on its own run; a store that fails here fails nothing."""
    base = plain.wall(ran.job) if plain is not None else None
    if not base:
        return
    from mlflow.entities import Metric, RunTag

    now = int(time.time() * 1000)
    with contextlib.suppress(Exception):
        client.log_batch(ran.run_id, metrics=[Metric(PLAIN_WALL, base, now, 0),
                                              Metric(SLOWDOWN, ran.wall_s / base, now, 0)],
                         tags=[RunTag(PLAIN_RUN_TAG, plain.run_id)])


def ended(client, plain: PlainPass | None, ran: list[Ran], report_run_id: str | None) -> str | None:
    """The pass's line against the plain pass (None: no plain pass, or no job ran); its makespan figures on
    the report run."""
    if plain is None or not ran:
        return None
    line = f"against the plain pass (run {plain.run_id[:12]}, {plain.jobs} jobs)"
    if _same_jobs([r.job for r in ran], plain) and plain.makespan_s > 0:
        makespan = max(r.ended for r in ran) - min(r.started for r in ran)
        line += f": makespan {makespan:.1f} s against {plain.makespan_s:.1f} s plain " \
                f"(ratio {makespan / plain.makespan_s:.2f})"
        if report_run_id:
            from mlflow.entities import Metric, RunTag

            now = int(time.time() * 1000)
            with contextlib.suppress(Exception):
                client.log_batch(report_run_id, tags=[RunTag(PLAIN_RUN_TAG, plain.run_id)], metrics=[
                    Metric("pack/makespan_s", makespan, now, 0),
                    Metric("pack/plain_makespan_s", plain.makespan_s, now, 0),
                    Metric("pack/makespan_vs_plain", makespan / plain.makespan_s, now, 0)])
    else:
        line += ": makespans not compared (this call ran other jobs than the plain pass, or some more than once)"
    walls = _walls([(r.name, r.wall_s, plain.wall(r.job)) for r in ran if plain.wall(r.job) is not None])
    return line + (f"; {walls} ({SLOWDOWN} on each job's run)" if walls else "")
