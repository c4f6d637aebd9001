"""`radt-ext sweep FILE`: a YAML sweep spec or a radT CSV file."""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import click

from radt_ext.errors import UsageError

SLURM_FLAGS = ("partition", "gpus_per_job", "cpus_per_job", "mem", "time_limit", "account", "sbatch", "slurm_folder",
               "no_wait")


def _plan(file: str, local: bool):
    """(the YAML spec, or None for a radT CSV file; its variants): every check, before anything runs. local:
    the variants run on this machine (a spec without `devices:` takes its GPUs, or cpu)."""
    from radt_ext import sweep as api

    if Path(file).suffix.lower() == ".csv":
        return None, api.plan(file)
    from radt_ext.sweep.spec import load

    spec = load(file, local=local)
    return spec, api.expand(spec)


def _slurm_options(file: str, spec, given: dict):
    """The spec's `slurm:` block overridden by the command line; its folder defaults beside the spec."""
    from radt_ext.sweep import slurm_options

    base = (spec.slurm if spec is not None else None) or slurm_options.SlurmOptions()
    extra = dict(slurm_options.sbatch_option(x, "--sbatch") for x in given["sbatch"])
    time_limit = slurm_options.minutes(given["time_limit"], "--time-limit") if given["time_limit"] else None
    options = base.merged(partition=given["partition"], gpus_per_job=given["gpus_per_job"],
                          cpus_per_job=given["cpus_per_job"], mem=given["mem"], time_limit=time_limit,
                          account=given["account"], folder=given["slurm_folder"], sbatch=extra)
    if options.folder is None:
        options.folder = str(Path(file).resolve().parent / "radt-ext-slurm")
    return options


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="print the expanded plan and run nothing")
@click.option("--executor", type=click.Choice(["local", "sequential", "slurm", "pack"]), default="local",
              show_default=True,
              help="local: each variant on the next free device of the pool (device_mode each: a lane per "
                   "device), as many at once as devices; sequential: one variant at a time; "
                   "slurm: a Slurm job per variant; pack: jobs share the pool's GPUs as the store's profiles "
                   "allow (also schedule: pack in FILE)")
@click.option("--status", is_flag=True, help="show each variant's state (store, and Slurm jobs) and run nothing")
@click.option("--cancel", is_flag=True, help="cancel this sweep's queued or running Slurm jobs")
@click.option("--partition", default=None, help="Slurm partition (slurm)")
@click.option("--gpus-per-job", type=click.IntRange(min=0), default=None, help="GPUs for each variant's job (slurm)")
@click.option("--cpus-per-job", type=click.IntRange(min=1), default=None, help="CPUs for each variant's job (slurm)")
@click.option("--mem", default=None, help="memory for each job, e.g. 64G (slurm)")
@click.option("--time-limit", default=None, help="each job's limit: minutes or [D-]HH:MM[:SS] (slurm; default 60)")
@click.option("--account", default=None, help="Slurm account to charge (slurm)")
@click.option("--sbatch", multiple=True, help="another sbatch option as KEY=VALUE, e.g. qos=high; repeatable (slurm)")
@click.option("--slurm-folder", default=None, help="job scripts, logs and jobs.json, on a filesystem the nodes share "
                                                   "(slurm; default radt-ext-slurm beside FILE)")
@click.option("--no-wait", is_flag=True, help="submit the jobs and return; --status follows them (slurm)")
@click.option("--output", "-o", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="the plan, status or results table: for people (on stderr; a plain table at full width when "
                   "it is not a terminal), or as CSV or JSON on stdout for scripts")
@click.option("--plain", is_flag=True, help="run each job of FILE once as a plain process, without radt-ext in it "
              "or beside it, one lane per device, and record the pass: the baseline a packed sweep's summary "
              "compares with")
@click.option("--no-progress", is_flag=True, help="do not count the workloads' samples, steps and epochs through "
              "the start-up hook (also RADT_EXT_NO_PROGRESS=1)")
def sweep(file, dry_run, executor, status, cancel, output, no_progress, plain, **slurm_flags):
    """Run every variant of FILE (YAML spec or radT CSV); variants FINISHED before are skipped."""
    from radt_ext import sweep as api
    from radt_ext.run.progress_env import no_progress_here

    if no_progress:
        no_progress_here()

    used = [f"--{k.replace('_', '-')}" for k in SLURM_FLAGS if slurm_flags.get(k) not in (None, (), False)]
    if used and executor != "slurm" and not (status or cancel):
        raise UsageError(f"{used[0]} is an option of --executor slurm; add --executor slurm or drop it")
    if plain:
        return _run_plain(file, executor, dry_run, status or cancel, output)
    if executor != "slurm" and not (dry_run or status or cancel):
        _start_nvml()
    spec, variants = _plan(file, local=executor != "slurm")
    from radt_ext.sweep.console import console as make_console

    console = make_console()
    if spec is not None and spec.devices_line:  # no `devices:` in the spec: say which were taken, first
        console.print(spec.devices_line, highlight=False, soft_wrap=True)
    packed = _packed(file, spec, executor)
    if packed is not None:
        return _run_packed(packed, dry_run, console, output)
    if status or cancel:
        return _status_or_cancel(file, spec, variants, console, cancel, slurm_flags, output)
    runner = executor
    if executor == "slurm" and not dry_run:
        from radt_ext.sweep.slurm import SlurmExecutor

        runner = SlurmExecutor(_slurm_options(file, spec, slurm_flags), wait=not slurm_flags["no_wait"])
    outcomes = _run_variants(variants, console, runner, output) if not dry_run else \
        api.run(variants, dry_run=True, console=console, executor=runner, output=output)
    if _shown(outcomes, len(variants), "variants", dry_run, console, output):
        return
    if slurm_flags["no_wait"]:
        queued = sum(o.status == "QUEUED" for o in outcomes)
        click.echo(f"{queued} variants queued as Slurm jobs; follow them with: "
                   f"radt-ext sweep {file} --executor slurm --status", err=output != "table")
        return
    _exit(outcomes, len(variants))


def _start_nvml() -> None:
    """NVML started (and held) beside the plan, so that the device check before the first job finds it started
    (its start ~10 ms on a GPU host, pynvml's import more); where it does not start the check says why."""
    import threading

    def start() -> None:
        from listeners import nvml_backend

        with contextlib.suppress(Exception):
            nvml_backend.hold()

    threading.Thread(target=start, name="radt-nvml-start", daemon=True).start()


def _run_variants(variants, console, executor, output: str):
    """The variants run by the executor (local, sequential or Slurm), the first one's first job started before
    MLflow is imported where it can be (head_start.py: the local executors); a stop signal meanwhile stops that
    job, and the sweep records it and stops."""
    from radt_ext import sweep as api
    from radt_ext.collocation.group import ENV_TIMINGS
    from radt_ext.run.signals import SignalRelay
    from radt_ext.sweep import head_start

    head = None

    def stop(signum: int) -> None:  # one that comes before the head start exists is read from `received` below
        if head is not None:
            head.stop(signum)

    timings, planned = os.environ.get(ENV_TIMINGS), time.time()
    relay = SignalRelay(stop).__enter__()
    try:
        head = head_start.begin(variants, executor, echo=lambda m: console.print(m, highlight=False))
        if head is None:  # nothing runs yet: a signal stops the sweep as it always did
            early = relay.received
            relay.__exit__(None, None, None)
            relay = None
            if early is not None:
                raise KeyboardInterrupt
        elif relay.received is not None:
            head.stop(relay.received)
        return api.run(variants, console=console, executor=executor, output=output, head=head)
    finally:
        if relay is not None:
            relay.__exit__(None, None, None)
        if head is not None:
            head.release()
        if timings:
            _write_timings(timings, planned, head)


def _write_timings(path: str, started: float, head) -> None:
    """RADT_EXT_TIMINGS=FILE: when the plan was made, the first variant's steps where it started early, and
    every group's steps (time.time())."""
    import json

    from radt_ext.collocation.group import TIMINGS
    from radt_ext.store.writer import LOCK_WAITS

    with contextlib.suppress(OSError), open(path, "w") as fh:
        json.dump({"planned": started, "ended": time.time(), "groups": TIMINGS, "lock_waits_s": list(LOCK_WAITS),
                   "head": None if head is None else {**head.runner.timings, "variant": head.variant.index,
                                                      "mlflow_loaded": head.mlflow_loaded}}, fh)


def _view_links(outcomes) -> None:
    """The comparison view of each experiment the sweep wrote, with its parameters, and its link."""
    from radt_ext.store.client import connect, tracking_uri
    from radt_ext.view import link_line, refresh_quietly

    params: dict[str, set[str]] = {}
    for o in outcomes:
        params.setdefault(o.variant.experiment, set()).update([*o.variant.setting,
                                                               *(f"system.{k}" for k in o.variant.system)])
    uri = tracking_uri()
    try:
        client = connect(uri)
    except UsageError as exc:
        click.echo(f"radt-ext: no comparison view link: {exc}", err=True)
        return
    for name, keys in params.items():
        experiment = client.get_experiment_by_name(name)
        if experiment is not None:
            refresh_quietly(client, experiment.experiment_id, sorted(keys))
            click.echo(link_line(uri, experiment.experiment_id), err=True)


def _shown(outcomes, planned: int, what: str, dry_run: bool, console, output: str) -> bool:
    """A dry run's count line (True: nothing else to do); else the results table and the views' links."""
    if dry_run:
        todo = sum(o.status == "PLANNED" for o in outcomes)
        click.echo(f"{planned} {what}, {todo} to run, {planned - todo} done (dry run: nothing ran)",
                   err=output != "table")
        return True
    from radt_ext.sweep import console as out
    from radt_ext.sweep.executor import results_table

    out.show(results_table(outcomes), console, output)
    _view_links(outcomes)
    return False


def _exit(outcomes, expected: int) -> None:
    """A stopped sweep exits as the signal says (130 where none did); else 1 when anything did not finish."""
    from radt_ext.run.streams import leave

    if len(outcomes) < expected or any(o.status == "KILLED" for o in outcomes):
        leave(next((o.exit_code for o in outcomes if o.status == "KILLED"), 130) or 130)
    leave(1 if any(o.status not in ("FINISHED", "SKIPPED") for o in outcomes) else 0)


def _packed(file: str, spec, executor: str):
    """The spec to pack (--executor pack, or schedule: pack in FILE), else None."""
    if spec is None:
        if executor == "pack":
            raise UsageError(f"{file}: --executor pack reads a YAML sweep spec; a radT CSV file sets its groups itself")
        return None
    scheduled = spec.pack is not None and spec.pack.scheduled
    if scheduled and executor not in ("local", "pack"):
        raise UsageError(f"{file}: schedule: pack runs on this machine's GPUs; drop --executor {executor} "
                         "or the schedule")
    if (scheduled or executor == "pack") and any(s for g in spec.groups for s in g.systems):
        raise UsageError(f"{file}: system: the pack scheduler does not apply host settings; drop the system "
                         "block or run the sweep without packing")
    return spec if scheduled or executor == "pack" else None


def _run_packed(spec, dry_run: bool, console, output: str = "table") -> None:
    from radt_ext.sweep.schedulers import scheduler

    packing = scheduler("pack")
    jobs = packing.jobs(spec)  # a group of several workloads: one line before anything runs
    outcomes = packing.run(spec, dry=dry_run, console=console, output=output)
    if not _shown(outcomes, len(outcomes), "jobs", dry_run, console, output):
        _exit(outcomes, len(jobs))


def _run_plain(file: str, executor: str, dry_run: bool, status_or_cancel: bool, output: str) -> None:
    from radt_ext.run.streams import leave
    from radt_ext.sweep import plain

    if executor in ("slurm", "sequential") or status_or_cancel:
        raise UsageError(f"--plain runs the jobs on this machine's devices, a lane each; drop "
                         f"{'--status/--cancel' if status_or_cancel else '--executor ' + executor}")
    spec, _ = _plan(file, local=True)
    if spec is None:
        raise UsageError(f"{file}: --plain reads a YAML sweep spec, not a radT CSV file")
    from radt_ext.sweep.console import console as make_console

    console = make_console()
    if spec.devices_line:
        console.print(spec.devices_line, highlight=False, soft_wrap=True)
    code = plain.run(spec, dry=dry_run, console=console, output=output)
    if not dry_run:
        leave(code)


def _status_or_cancel(file, spec, variants, console, cancel: bool, slurm_flags, output: str = "table") -> None:
    from radt_ext.sweep import console as out
    from radt_ext.sweep import slurm
    from radt_ext.sweep.executor import resume_state
    from radt_ext.store.client import connect, tracking_uri

    folder = _slurm_options(file, spec, slurm_flags).folder
    if cancel:
        jobs = slurm.cancel_sweep(variants, folder)
        click.echo(f"cancelled Slurm jobs {' '.join(jobs)}" if jobs else "no queued or running Slurm job of this sweep")
        return
    client = connect(tracking_uri())
    done, _ = resume_state(client, variants)
    table = out.table("#", "hash", "variant", "state", "slurm job", "run", title="sweep status")
    counts: dict[str, int] = {}
    for v, state, job, run_id in slurm.status_rows(variants, client, folder, done):
        table.add_row(v.index, v.hash[:10], v.title, state, job, run_id)
        counts[state] = counts.get(state, 0) + 1
    out.show(table, console, output)
    click.echo(", ".join(f"{n} {state}" for state, n in counts.items()), err=output != "table")
