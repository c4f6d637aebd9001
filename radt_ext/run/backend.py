"""MLflow project backend: `mlflow run DIR --backend radt-ext [--backend-config '{...}']`.

Runs the project's entry point exactly as MLflow's local backend would, but under `radt-ext run`, so
the hardware metrics land in the project's run. backend-config keys: `listeners` ("nvml,gpm,top"),
`interval` (seconds), `synchronous` (false: start the job and return), `full_rate_store` (true: every
point into the store, as `radt-ext run --full-rate-store`; default false: the store's bounded shape, the
full rate in the run's timeline artifact), `progress` (false: as `radt-ext run --no-progress`). Environment managers: `local` (default) and
`virtualenv`/`uv`, whose activation runs inside the monitored command.

It behaves as the local backend does: `mlflow run` waits for the job, its output streams through,
and the command exits with the job's exit code (non-zero when it failed, 128 + N when signal N
stopped it). MLflow's CLI waits only for its own local and kubernetes backends: it hands every other
backend synchronous=False and returns as soon as `run()` does. So under the CLI this backend waits
itself, once MLflow has tagged the run: on the close of the CLI command's click context. From
Python, `mlflow.projects.run(..., backend="radt-ext")` waits as for any backend (MLflow calls
`SubmittedRun.wait()`; `synchronous=False` returns at once). While it waits, SIGINT (Ctrl-C),
SIGTERM and SIGHUP are handed to the job's `radt-ext run` once — it runs in a session of its own, so
a terminal's Ctrl-C does not reach it twice — which stops the workload and ends the run KILLED.
`{"synchronous": false}` starts the job and returns under the CLI too; the job goes on alone.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from mlflow.entities import RunStatus
from mlflow.exceptions import ExecutionException
from mlflow.projects.backend.abstract_backend import AbstractBackend
from mlflow.projects.submitted_run import SubmittedRun
from mlflow.projects.utils import (
    MLFLOW_LOCAL_BACKEND_RUN_ID_CONFIG,
    PROJECT_ENV_MANAGER,
    PROJECT_STORAGE_DIR,
    PROJECT_SYNCHRONOUS,
    fetch_and_validate_project,
    get_entry_point_command,
    get_or_create_run,
    get_run_env_vars,
    load_project,
)

from radt_ext.errors import UsageError
from radt_ext.run.signals import wait_child

_logger = logging.getLogger("mlflow.projects.radt_ext")  # MLflow's projects log, as its own backends write
SYNCHRONOUS = "synchronous"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _activation(project, work_dir: str, env_manager: str) -> str | None:
    if env_manager in (None, "local"):
        return None
    if env_manager not in ("virtualenv", "uv"):
        raise ExecutionException(f"--env-manager {env_manager} is not supported by the radt-ext backend; "
                                 "use local or virtualenv")
    from mlflow.utils.environment import _PythonEnv
    from mlflow.utils.virtualenv import _create_virtualenv, _get_mlflow_virtualenv_root, _get_virtualenv_name

    python_env = _PythonEnv.from_yaml(project.env_config_path) if project.env_config_path else _PythonEnv()
    env_dir = Path(_get_mlflow_virtualenv_root()) / _get_virtualenv_name(python_env, Path(work_dir))
    return _create_virtualenv(local_model_path=Path(work_dir), python_env=python_env, env_dir=env_dir,
                              env_manager=env_manager)


def _flag(config: dict, key: str, default: bool = False) -> bool:
    """A yes/no backend-config value: true/false (JSON), or the words true/false/yes/no/1/0."""
    value = config.get(key, default)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off", ""):
        return False
    raise UsageError(f"backend-config {key}={value!r} is not true or false; write e.g. "
                     f"--backend-config '{{\"{key}\": true}}'")


class RadtSubmittedRun(SubmittedRun):
    """The job: `radt-ext run` in a process session of its own. While it is waited for, stop signals
    to this process are handed to it (once each)."""

    def __init__(self, run_id: str, proc: subprocess.Popen):
        super().__init__()
        self._run_id = run_id
        self.proc = proc
        self.signalled: int | None = None  # the first stop signal handed on
        self._previous: dict[int, object] = {}

    @property
    def run_id(self) -> str:
        return self._run_id

    def forward_signals(self) -> None:
        """From now until the job ends, SIGINT/SIGTERM/SIGHUP go to the job (main thread only)."""
        if threading.current_thread() is not threading.main_thread() or self._previous:
            return
        for sig in FORWARDED:
            self._previous[sig] = signal.signal(sig, self._forward)

    def _forward(self, signum, _frame) -> None:
        if self.proc.poll() is not None:
            self._restore()  # the job ended and nobody waited for it: the signal is this process's again
            signal.raise_signal(signum)
            return
        self.signalled = self.signalled or signum
        try:
            os.kill(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def exit_code(self) -> int:
        """Wait for the job; its exit code (radt-ext's: the workload's, 128 + N after signal N)."""
        try:
            return wait_child(self.proc)
        finally:
            self._restore()

    def wait(self) -> bool:
        code = self.exit_code()
        if self.signalled == signal.SIGINT:
            raise KeyboardInterrupt  # as under the local backend; the run is ended KILLED already
        if self.signalled is not None:
            signal.raise_signal(self.signalled)  # the job has ended: now what the signal meant to do here
        return code == 0

    def cancel(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # radt-ext stops the workload and ends the run KILLED
            self.proc.wait()
        self._restore()

    def get_status(self) -> str:
        code = self.proc.poll()
        status = RunStatus.RUNNING if code is None else RunStatus.FINISHED if code == 0 else RunStatus.FAILED
        return RunStatus.to_string(status)


def _under_mlflow_cli():
    """The click context of `mlflow run` when MLflow's CLI called us, else None."""
    try:
        import click
    except ImportError:
        return None
    ctx = click.get_current_context(silent=True)
    callback = getattr(ctx.command, "callback", None) if ctx is not None else None
    if callback is not None and getattr(callback, "__module__", "").startswith("mlflow.cli") \
            and ctx.command.name == "run":
        return ctx
    return None


def _wait_at_exit(ctx, submitted: RadtSubmittedRun) -> None:
    """`mlflow run` ends with the job: its exit code, after MLflow has tagged the run."""

    def finish():
        import click

        code = submitted.exit_code()
        if code == 0:
            _logger.info("=== Run (ID '%s') succeeded ===", submitted.run_id)
            return
        how = (f"stopped by {signal.Signals(submitted.signalled).name}" if submitted.signalled
               else f"failed (exit code {code})")
        _logger.error("=== Run (ID '%s') %s ===", submitted.run_id, how)
        raise click.exceptions.Exit(code)

    ctx.call_on_close(finish)


def _synchronous(backend_config) -> bool | None:
    value = backend_config.get(SYNCHRONOUS)
    if value is not None and not isinstance(value, bool):
        raise ExecutionException(f"backend-config {SYNCHRONOUS!r} is {value!r}; use true or false")
    return value


class RadtBackend(AbstractBackend):
    def run(self, project_uri, entry_point, params, version, backend_config, tracking_uri, experiment_id):
        full_rate = _flag(backend_config, "full_rate_store")  # bad input before anything runs
        progress = _flag(backend_config, "progress", default=True)
        synchronous = _synchronous(backend_config)
        work_dir = fetch_and_validate_project(project_uri, version, entry_point, params)
        project = load_project(work_dir)
        run = get_or_create_run(backend_config.get(MLFLOW_LOCAL_BACKEND_RUN_ID_CONFIG), project_uri,
                                experiment_id, work_dir, version, entry_point, params)
        run_id = run.info.run_id
        command = " ".join(get_entry_point_command(project, entry_point, params, backend_config.get(PROJECT_STORAGE_DIR)))
        activate = _activation(project, work_dir, backend_config.get(PROJECT_ENV_MANAGER))
        if activate:
            command = f"{activate} && {command}"
        radt = [sys.executable, "-m", "radt_ext.cli", "run", "--run-id", run_id]
        if backend_config.get("listeners"):
            radt += ["--listeners", str(backend_config["listeners"])]
        if backend_config.get("interval") is not None:
            radt += ["--interval", str(backend_config["interval"])]
        if full_rate:
            radt.append("--full-rate-store")
        if not progress:
            radt.append("--no-progress")
        env = {**os.environ, **get_run_env_vars(run_id, experiment_id)}
        _logger.info("=== Running command '%s' in run with ID '%s' under radt-ext === ", command, run_id)
        # a session of its own: a terminal's Ctrl-C reaches it once, through this process
        proc = subprocess.Popen([*radt, "--", "bash", "-c", command], cwd=work_dir, env=env, close_fds=True,
                                start_new_session=True)
        submitted = RadtSubmittedRun(run_id, proc)
        if synchronous is False:
            return submitted
        ctx = _under_mlflow_cli()
        if ctx is not None:
            submitted.forward_signals()
            _wait_at_exit(ctx, submitted)
        elif backend_config.get(PROJECT_SYNCHRONOUS) or synchronous:
            submitted.forward_signals()  # MLflow calls wait() next
            if not backend_config.get(PROJECT_SYNCHRONOUS) and not submitted.wait():
                raise ExecutionException(f"Run (ID '{run_id}') failed")
        return submitted
