"""The plain pass in the store, recorded from outside the jobs: a parent run for the pass (tag
`sweep.pass=plain`, `sweep.id`, metric `summary/makespan_s`) and a child run per job whose start and end are
its process's, FINISHED/FAILED/KILLED by its exit code, metric `summary/wall_s`, tags `sweep.workload` and
`sweep.workload_hash` (together the job across passes, as its exclusive and packed runs carry them) and its
output as the artifact `plain/<job>.log`. Each job is recorded on a thread of the recorder's own as it ends,
so the lanes never wait for the store.

`newest(client, experiment, jobs)` reads back the newest FINISHED plain pass that ran every one of those jobs.
"""
from __future__ import annotations

import contextlib
import queue
import shlex
import threading
from dataclasses import dataclass

from mlflow.entities import Metric, Param
from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

PASS_TAG = "sweep.pass"
PLAIN = "plain"
KEY_TAG = "sweep.workload_hash"
SOURCE_TAG = "sweep.workload"
JOB_TAG = "sweep.job"
WALL = "summary/wall_s"
MAKESPAN = "summary/makespan_s"


def _ms(t: float) -> int:
    return int(t * 1000)


class Recorder:
    def __init__(self, client, experiment_id: str, sweep_id: str, devices: list[str], jobs: int, started: float,
                 echo=print):
        self.client, self.experiment_id, self.sweep_id = client, experiment_id, sweep_id
        self.echo = echo
        name = f"{sweep_id}: plain pass"
        self.run_id = client.create_run(experiment_id, start_time=_ms(started), run_name=name, tags={
            MLFLOW_RUN_NAME: name, "sweep.id": sweep_id, PASS_TAG: PLAIN, "sweep.devices": ",".join(devices),
            "sweep.jobs": str(jobs)}).info.run_id
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="radt-plain-recorder", daemon=True)
        self._thread.start()

    def add(self, ended) -> None:
        self._queue.put(ended)

    def _work(self) -> None:
        while (ended := self._queue.get()) is not None:
            try:
                self._record(ended)
            except Exception as exc:  # the store failing one job's run does not lose the others'
                self.echo(f"radt-ext: plain {ended.job.name}: not recorded ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:200] if str(exc) else ''})")

    def _record(self, e) -> None:
        job = e.job
        tags = {MLFLOW_PARENT_RUN_ID: self.run_id, MLFLOW_RUN_NAME: f"{self.sweep_id}: plain {job.name}",
                "sweep.id": self.sweep_id, PASS_TAG: PLAIN, KEY_TAG: job.key, JOB_TAG: job.name,
                SOURCE_TAG: job.source, "sweep.device": e.device, "sweep.exit_code": str(e.returncode),
                "radt_ext.command": shlex.join(job.command)[:5000],
                **{f"sweep.param.{k}": v for k, v in job.params.items()}}
        run_id = self.client.create_run(self.experiment_id, start_time=_ms(e.started), tags=tags,
                                        run_name=tags[MLFLOW_RUN_NAME]).info.run_id
        self.client.log_batch(run_id, metrics=[Metric(WALL, e.wall_s, _ms(e.ended), 0)],
                              params=[Param(k, str(v)[:6000]) for k, v in job.params.items()])
        try:
            self.client.log_artifact(run_id, str(e.log), PLAIN)
        except Exception as exc:
            self.echo(f"radt-ext: plain {job.name}: its output stays in {e.log} ({type(exc).__name__})")
        else:
            with contextlib.suppress(OSError):
                e.log.unlink()
        self.client.set_terminated(run_id, e.status, end_time=_ms(e.ended))

    def close(self, status: str, ended: list, started: float, end: float) -> str:
        """Wait for every job's run, then end the pass's run with its makespan (first start to last end,
        kept as `makespan_s`)."""
        self._queue.put(None)
        self._thread.join()
        first = min((e.started for e in ended), default=started)
        last = max((e.ended for e in ended), default=end)
        self.makespan_s = last - first
        with contextlib.suppress(Exception):
            self.client.log_metric(self.run_id, MAKESPAN, self.makespan_s, _ms(last), 0)
        self.client.set_terminated(self.run_id, status, end_time=_ms(last))
        return self.run_id


@dataclass
class PlainPass:
    run_id: str
    makespan_s: float
    walls: dict[tuple[str, str], float]  # {(sweep.workload, sweep.workload_hash): wall s}
    jobs: int

    def wall(self, job: tuple[str, str]) -> float | None:
        return self.walls.get(job)


def newest(client, experiment: str, jobs) -> PlainPass | None:
    """The newest FINISHED plain pass in the experiment whose jobs all FINISHED and include every one of
    `jobs` ((sweep.workload, sweep.workload_hash) pairs); None when there is none (or the store cannot say)."""
    keys = set(jobs)
    try:
        exp = client.get_experiment_by_name(experiment)
        if exp is None or exp.lifecycle_stage != "active" or not keys:
            return None
        runs = client.search_runs([exp.experiment_id], f"tags.`{PASS_TAG}` = '{PLAIN}'", max_results=50000,
                                  order_by=["attributes.start_time DESC"])
    except Exception:
        return None
    kids: dict[str, list] = {}
    for r in runs:
        parent = r.data.tags.get(MLFLOW_PARENT_RUN_ID)
        if parent:
            kids.setdefault(parent, []).append(r)
    for r in runs:
        if r.data.tags.get(MLFLOW_PARENT_RUN_ID) or r.info.status != "FINISHED" or MAKESPAN not in r.data.metrics:
            continue
        ran = kids.get(r.info.run_id, [])
        if not ran or any(j.info.status != "FINISHED" or WALL not in j.data.metrics for j in ran):
            continue
        walls = {(j.data.tags.get(SOURCE_TAG), j.data.tags.get(KEY_TAG)): j.data.metrics[WALL] for j in ran}
        if keys <= set(walls):
            return PlainPass(r.info.run_id, r.data.metrics[MAKESPAN], walls, len(ran))
    return None
