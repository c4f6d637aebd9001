"""MLflow project backend: `mlflow run DIR --backend radt-ext [--backend-config '{...}']`.

Runs the project's entry point exactly as MLflow's local backend would, but
under `radt-ext run`, so the hardware metrics land in the project's run.
backend-config keys: `listeners` ("nvml,gpm,top"), `interval` (seconds), `full_rate_store` (true: every
point into the store, as `radt-ext run --full-rate-store`; default false: the store's bounded shape, the
full rate in the run's timeline artifact).
Environment managers: `local` (default) and `virtualenv`/`uv`, whose activation
runs inside the monitored command.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from mlflow.projects.backend.abstract_backend import AbstractBackend
from mlflow.projects.backend.local import _run_entry_point
from mlflow.projects.utils import (
    MLFLOW_LOCAL_BACKEND_RUN_ID_CONFIG,
    PROJECT_ENV_MANAGER,
    PROJECT_STORAGE_DIR,
    fetch_and_validate_project,
    get_entry_point_command,
    get_or_create_run,
    load_project,
)

from radt_ext.errors import UsageError


def _activation(project, work_dir: str, env_manager: str) -> str | None:
    if env_manager in (None, "local"):
        return None
    if env_manager not in ("virtualenv", "uv"):
        raise UsageError(f"--env-manager {env_manager} is not supported by the radt-ext backend; use local or virtualenv")
    from mlflow.utils.environment import _PythonEnv
    from mlflow.utils.virtualenv import _create_virtualenv, _get_mlflow_virtualenv_root, _get_virtualenv_name

    python_env = _PythonEnv.from_yaml(project.env_config_path) if project.env_config_path else _PythonEnv()
    env_dir = Path(_get_mlflow_virtualenv_root()) / _get_virtualenv_name(python_env, Path(work_dir))
    return _create_virtualenv(local_model_path=Path(work_dir), python_env=python_env, env_dir=env_dir,
                              env_manager=env_manager)


def _flag(config: dict, key: str) -> bool:
    """A yes/no backend-config value: true/false (JSON), or the words true/false/yes/no/1/0."""
    value = config.get(key, False)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off", ""):
        return False
    raise UsageError(f"backend-config {key}={value!r} is not true or false; write e.g. "
                     f"--backend-config '{{\"{key}\": true}}'")


class RadtBackend(AbstractBackend):
    def run(self, project_uri, entry_point, params, version, backend_config, tracking_uri, experiment_id):
        full_rate = _flag(backend_config, "full_rate_store")  # bad input before anything runs
        work_dir = fetch_and_validate_project(project_uri, version, entry_point, params)
        project = load_project(work_dir)
        run = get_or_create_run(backend_config.get(MLFLOW_LOCAL_BACKEND_RUN_ID_CONFIG), project_uri,
                                experiment_id, work_dir, version, entry_point, params)
        command = " ".join(get_entry_point_command(project, entry_point, params, backend_config.get(PROJECT_STORAGE_DIR)))
        activate = _activation(project, work_dir, backend_config.get(PROJECT_ENV_MANAGER))
        if activate:
            command = f"{activate} && {command}"
        radt = [sys.executable, "-m", "radt_ext.cli", "run", "--run-id", run.info.run_id]
        if backend_config.get("listeners"):
            radt += ["--listeners", str(backend_config["listeners"])]
        if backend_config.get("interval") is not None:
            radt += ["--interval", str(backend_config["interval"])]
        if full_rate:
            radt.append("--full-rate-store")
        wrapped = f"{shlex.join(radt)} -- bash -c {shlex.quote(command)}"
        return _run_entry_point(wrapped, work_dir, experiment_id, run.info.run_id)
