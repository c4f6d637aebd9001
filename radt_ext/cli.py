"""The `radt-ext` command line."""
from __future__ import annotations

import signal
import sys
import time

IMPORTED = time.time()  # before the other imports: `radt-ext run`'s timings (RADT_EXT_TIMINGS) start here
EARLY_SIGNALS: list[int] = []  # stop signals `radt-ext run` got before its session's handlers were in place


def _early_stop(signum, _frame) -> None:
    EARLY_SIGNALS.append(signum)


if sys.argv[1:2] == ["run"] and sys.argv[0].endswith(("radt-ext", "cli.py")):  # `radt-ext run`, from its start
    for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(_sig, _early_stop)

import contextlib  # noqa: E402
import faulthandler  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import click  # noqa: E402

from radt_ext.errors import UsageError  # noqa: E402
from radt_ext.run.streams import leave, say, tolerate  # noqa: E402

ENV_TIMINGS = "RADT_EXT_TIMINGS"  # a file: `radt-ext run` writes the time.time() of each of its steps there


# Commands that live in their own modules, imported only when named (MLflow alone takes seconds to import)
LAZY_COMMANDS = {
    "sync": ("radt_ext.store.sync", "sync"),
    "sweep": ("radt_ext.sweep.cli", "sweep"),
    "compare": ("radt_ext.compare.cli", "compare"),
    "collocate": ("radt_ext.collocation.cli", "collocate"),
    "ops": ("radt_ext.ops.cli", "ops"),
    "compact": ("radt_ext.store.compact", "compact"),
    "ui": ("radt_ext.view.ui", "ui"),
}


class Group(click.Group):
    """Turns UsageError into one line on stderr (no traceback) and exit code 2; output whose reader
    went away is dropped instead of ending the command in a traceback. Commands in LAZY_COMMANDS are
    imported when used (a command whose optional dependency is missing is left out)."""

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | {n for n in LAZY_COMMANDS if self.get_command(ctx, n)})

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is not None or name not in LAZY_COMMANDS:
            return command
        module, attr = LAZY_COMMANDS[name]
        try:
            command = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module.startswith(exc.name):
                raise
            return None
        self.add_command(command, name)
        return command

    def main(self, *args, **kwargs):
        from radt_ext.store import client

        client.FREEZE_HEAP = True  # this command's process, not a program importing radt_ext
        tolerate()
        # a crash in native code (a driver library) still says where each thread was, on stderr
        with contextlib.suppress(Exception):  # a stderr with no file behind it (captured): none
            faulthandler.enable()
        return super().main(*args, **kwargs)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            raise click.UsageError(str(exc)) from None


def _tags(values: tuple[str, ...]) -> dict[str, str]:
    tags = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise UsageError(f"--tag {value!r} is not KEY=VALUE; write e.g. --tag variant=amp")
        tags[key] = val
    return tags


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Record what the hardware did during ML workloads, into MLflow runs."""


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--listeners", "-l", default=None, help="e.g. nvml,gpm:0.05,top (default: every available one)")
@click.option("--interval", "-i", type=float, default=None, help="seconds between samples for every listener")
@click.option("--experiment-name", default=None, help="MLflow experiment (default: MLFLOW_EXPERIMENT_NAME or Default)")
@click.option("--run-name", default=None)
@click.option("--run-id", default=None, help="join this existing run (default: MLFLOW_RUN_ID, else a new run)")
@click.option("--tag", "tags", multiple=True, help="KEY=VALUE tag for the run; repeatable")
@click.option("--full-rate-store", is_flag=True,
              help="every point into the tracking store (default: a bounded shape there, every point in the "
                   "run's timeline artifact; also RADT_EXT_FULL_RATE_STORE=1)")
@click.option("--no-progress", is_flag=True,
              help="do not count a Python workload's samples, steps and epochs through the start-up hook "
                   "(also RADT_EXT_NO_PROGRESS=1)")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run(listeners, interval, experiment_name, run_name, run_id, tags, full_rate_store, no_progress, command):
    """Run COMMAND under the listeners, logging to an MLflow run; exits with COMMAND's code.

    radt-ext run [OPTIONS] -- COMMAND [ARGS]...
    """
    from radt_ext.run.session import ENV_ACTIVE, Interrupted, WorkloadSession, WorkloadSpec

    command = list(command)
    if not command:
        raise UsageError("no command to run; write it after `--`, e.g. radt-ext run -- python train.py")
    active = os.environ.get(ENV_ACTIVE)
    if active and active == (run_id or os.environ.get("MLFLOW_RUN_ID") or active):
        # already monitored by an outer radt-ext (e.g. the project backend): just run the workload
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            raise UsageError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
    spec = WorkloadSpec(command=command, listeners=listeners, interval=interval, experiment_name=experiment_name,
                        run_name=run_name, run_id=run_id, tags=_tags(tags),
                        full_rate_store=True if full_rate_store else None, progress=False if no_progress else None)
    session = WorkloadSession(spec)

    def announce(s):
        if not s.spooled:
            say(f"radt-ext: run {s.run_id} in experiment {s.experiment_id} at {s.uri}")

    try:
        code = session.run(announce=announce, early_signals=EARLY_SIGNALS)
    except Interrupted as exc:
        say(f"radt-ext: {exc}")
        _write_timings(session)
        sys.exit(128 + exc.signum)
    if session.spooled:
        say(f"radt-ext: run {session.status()} (exit code {session.returncode}), recorded with its samples in "
            f"{session.spool_path}, not yet in {session.uri} ({session.spooled}); `radt-ext sync` records it there")
    else:
        say(f"radt-ext: run {session.run_id} {session.status()} (exit code {session.returncode})")
        if session.experiment_id is not None:
            from radt_ext.view import link_line

            say(link_line(session.uri, session.experiment_id))
    _write_timings(session)
    _exit(code, stopped=session.stopped_at is not None)


def _exit(code: int, stopped: bool) -> None:
    """Exit with `code` the quick way (streams.leave), after a stop even when the command was called
    in-process (threads left with the store, imports half done)."""
    leave(code, now=stopped)


def _write_timings(session) -> None:
    """With RADT_EXT_TIMINGS=FILE: the session's steps as JSON (benchmarks/startup/first_run.py reads them)."""
    path = os.environ.get(ENV_TIMINGS)
    if not path:
        return
    import psutil

    timings = {"process_started": psutil.Process().create_time(), "cli_imported": IMPORTED, **session.timings,
               "ended": time.time()}
    try:
        with open(path, "w") as fh:
            json.dump(timings, fh)
    except OSError as exc:
        say(f"radt-ext: warning: cannot write the timings to {path} ({exc.strerror or exc})")


@main.command(name="listeners")
def list_listeners():
    """Every listener, whether it works on this machine, and why not."""
    from listeners import registry
    from rich.console import Console
    from rich.table import Table

    table = Table("listener", "available", "reason / description")
    for name in registry.LISTENERS:
        reason = registry.availability(name)
        try:
            cls = registry.load(name)
            floor = f"; --interval goes no lower than {cls.min_interval:g} s" if cls.min_interval else ""
            desc = f"{cls.description} (every {cls.default_interval:g} s{floor})"
        except Exception:
            desc = ""
        table.add_row(name, "no" if reason else "yes", reason or desc)
    Console().print(table)


if __name__ == "__main__":
    main()
