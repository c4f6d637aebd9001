"""A store of real runs for report, compare, notebook and MLflow-UI tests, built once per session.

Runs are made with the real CLI on tiny CPU workloads (tests/radt_ext/report/epochs_workload.py);
the nvml/gpm listeners replay a real H200 recording so the GPU panels have data:
- experiment "variants": run `baseline` and run `amp` (tagged baseline_run_id = baseline),
  both tagged recipe=toy, sweep.id=s1, collocation.mode=exclusive;
- experiment "collocation": `radt-ext collocate --mode naive --device cpu` with two workloads.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
WORKLOAD = str(Path(__file__).with_name("epochs_workload.py"))
# The runs' command lines as a user would type them (they show in the UI's screenshots): `python` found on
# PATH (this interpreter's folder first) and the workload as a module of the repository on PYTHONPATH.
PYTHON = "python"
WORKLOAD_ARGS = [PYTHON, "-m", "tests.radt_ext.report.epochs_workload"]
TRACE = str(REPO / "listeners" / "traces" / "h200_matmul.json")
RUN_ID = re.compile(r"radt-ext: run ([0-9a-f]{32}) in experiment")
GROUP_ID = re.compile(r"radt-ext: group \S+ run ([0-9a-f]{32})")


@dataclass
class Store:
    root: Path
    uri: str
    baseline: str
    amp: str
    parent: str
    baseline_stderr: str = ""  # what `radt-ext run` printed for the baseline run

    def env(self) -> dict[str, str]:
        return {"MLFLOW_TRACKING_URI": self.uri}


def _check(proc, pattern) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = pattern.search(proc.stderr)
    assert found, proc.stderr[-2000:]
    return found.group(1)


def build(root: Path) -> Store:
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    (root / "tmp").mkdir(exist_ok=True)
    env = {"MLFLOW_TRACKING_URI": uri, "RADT_EXT_NVML_REPLAY": TRACE, "RADT_EXT_SPOOL_DIR": str(root / "spool"),
           "TMPDIR": str(root / "tmp"),  # the runs' working folders, where the files they keep lie
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    for var in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "RADT_EXT_ACTIVE"):
        env[var] = ""
    common = ["run", "--listeners", "top,nvml,gpm", "--interval", "0.25", "--experiment-name", "variants",
              "--tag", "recipe=toy", "--tag", "sweep.id=s1", "--tag", "collocation.mode=exclusive"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RADT_EXT_"))}

    def cli(*args):
        return _radt(clean, env, root, *args)

    made = cli(*common, "--run-name", "baseline", "--tag", "variant=baseline", "--", *WORKLOAD_ARGS, "--seconds", "0.6")
    baseline = _check(made, RUN_ID)
    amp = _check(cli(*common, "--run-name", "amp", "--tag", "variant=amp", "--tag", f"baseline_run_id={baseline}",
                     "--", *WORKLOAD_ARGS, "--seconds", "0.3", "--batch", "64"), RUN_ID)
    workload = " ".join(WORKLOAD_ARGS)
    parent = _check(cli("collocate", "--mode", "naive", "--device", "cpu", "--experiment-name", "collocation",
                        "--name", "small", "--name", "large",
                        "-w", f"{workload} --seconds 0.3", "-w", f"{workload} --seconds 0.5"), GROUP_ID)
    return Store(root, uri, baseline, amp, parent, made.stderr)


def _radt(clean_env, env, cwd, *args):
    """The real CLI in a child process, with no MLFLOW_*/RADT_EXT_* variable but ours."""
    return subprocess.run([sys.executable, "-m", "radt_ext.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**clean_env, **{k: v for k, v in env.items() if v}})


_BUILT: dict[str, Store] = {}


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Store:
    """The shared store; built on first use in the test session (about a minute on 2 cores)."""
    if "store" not in _BUILT:
        _BUILT["store"] = build(tmp_path_factory.mktemp("report-store"))
    return _BUILT["store"]
