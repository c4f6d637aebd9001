"""`radt-ext sweep FILE --plain`: the spec's jobs as they would run without radt-ext, the baseline a packed
pass is measured against. Each distinct job (a workload of the spec, its command as a parameter setting
renders it; modes, repeats, packing and listeners do not count) runs once as a plain process, one lane per
device of the spec (plain_lanes.py); radt-ext records the pass from outside (plain_store.py).
"""
from __future__ import annotations

import shlex
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from radt_ext.errors import UsageError
from radt_ext.sweep import console as out
from radt_ext.sweep.plain_lanes import Ended, Lanes, PlainJob
from radt_ext.sweep.plan import expand
from radt_ext.sweep.spec import Sweep, one_line


def jobs_of(sweep: Sweep) -> list[PlainJob]:
    """The spec's distinct jobs in its order; a one-line UsageError, before anything runs, for a spec with a
    workload that is not a command of its own, or with host settings."""
    recipes = [f"{n} (recipe {d.recipe})" for n, d in sweep.workloads.items() if d.recipe]
    if recipes:
        raise UsageError(one_line(
            f"{sweep.source}: --plain runs each workload's command as the spec gives it, and {', '.join(recipes)} "
            f"{'is a recipe' if len(recipes) == 1 else 'are recipes'} whose command runs under radt-ext; "
            "give it as `command:` or drop it"))
    if any(s for g in sweep.groups for s in g.systems):
        raise UsageError(f"{sweep.source}: system: --plain runs the commands as given, without host settings; "
                         "drop the system block or run the sweep without --plain")
    pooled = replace(sweep, device_mode="pool", gpus_per_variant=1, repeats=1)  # a job's key names no device
    jobs: dict[tuple[str, str], PlainJob] = {}
    for v in expand(pooled):
        for w in v.workloads:
            if (w.source, w.key) in jobs:
                continue
            setting = {k: x for k, x in v.setting.items() if k in w.params}
            name = "-".join([w.source, *(f"{k}={x}" for k, x in setting.items())])
            jobs[w.source, w.key] = PlainJob(name, w.key, w.source, list(w.command), setting, dict(w.env), w.cwd)
    named: dict[str, int] = {}
    for j in jobs.values():  # file names: one per job
        n = named[j.name] = named.get(j.name, 0) + 1
        if n > 1:
            j.name = f"{j.name}-{n}"
    return list(jobs.values())


def results_table(ended: list[Ended], jobs: list[PlainJob], missing: str = "NOT RUN"):
    table = out.table("job", "device", "status", out.Column("wall s", "{:.2f}"), "exit", "command",
                      title="plain pass (each job as a plain process, one lane per device)")
    by_name = {e.job.name: e for e in ended}
    for j in jobs:
        e = by_name.get(j.name)
        table.add_row(j.name, e.device if e else "", e.status if e else missing, e.wall_s if e else None,
                      e.returncode if e else "", shlex.join(j.command))
    return table


def run(sweep: Sweep, dry: bool = False, console=None, output: str = "table", uri: str | None = None) -> int:
    """The pass (or, dry, its jobs and lanes); the exit code: 0 when every job FINISHED, 1 when one did not,
    the stop's 128+signal when stopped."""
    from radt_ext.collocation.group import check_devices

    console = console or out.console()
    jobs = jobs_of(sweep)
    devices = list(sweep.devices)
    say = lambda m: console.print(m, highlight=False, soft_wrap=True)  # noqa: E731
    if dry:
        out.show(results_table([], jobs, "PLANNED"), console, output)
        say(f"{len(jobs)} jobs on {len(devices)} lane(s) ({', '.join(devices)}) (dry run: nothing ran)")
        return 0
    check_devices(devices, where="devices:")
    from radt_ext.store.client import connect, named_experiment_id, tracking_uri
    from radt_ext.sweep.plain_store import Recorder

    client = connect(tracking_uri(uri))
    experiment_id = named_experiment_id(client, sweep.experiment)
    folder = Path(tempfile.mkdtemp(prefix="radt-ext-plain-"))
    started = time.time()
    recorder = Recorder(client, experiment_id, sweep.name, devices, len(jobs), started, echo=say)

    def ended_one(e: Ended) -> None:
        recorder.add(e)
        say(f"plain {e.job.name} (on {e.device}): {e.status} in {e.wall_s:.2f} s (exit {e.returncode})")

    lanes = Lanes(jobs, devices, folder, on_end=ended_one)
    status = "FAILED"
    ended: list[Ended] = []
    try:
        ended = lanes.run()
        all_ran = len(ended) == len(jobs)
        status = ("KILLED" if lanes.stopping else
                  "FINISHED" if all_ran and all(e.status == "FINISHED" for e in ended) else "FAILED")
    finally:
        run_id = recorder.close(status, ended, started, time.time())
        if not any(folder.iterdir()):
            shutil.rmtree(folder, ignore_errors=True)
    out.show(results_table(ended, jobs), console, output)
    failed = [e.job.name for e in ended if e.status != "FINISHED"]
    say(f"plain pass: {len(ended)} of {len(jobs)} jobs on {len(devices)} lane(s) in {recorder.makespan_s:.2f} s, "
        f"{status} (run {run_id})" + (f"; not FINISHED: {', '.join(failed)}" if failed else ""))
    if lanes.stopping:
        return 128 + lanes.stopping
    return 0 if status == "FINISHED" else 1
