"""README command 1 on a fresh store: how long beyond its load it takes, and where that time goes.

    python -m benchmarks.startup.first_run --out results [--repeats 3] [--seconds 10]

Each repeat runs `radt-ext run --run-name first -- python -m radt_ext.workloads.matmul --seconds S` as a
fresh process in a fresh temporary directory: no store there yet (the default `./mlflow.db` is made by the
run), HOME and RADT_EXT_SPOOL_DIR inside it, no MLFLOW_* variables. The workload is started through
`sh -c 'date +%s.%N > began; exec …'` so the moment it was started is known without Python's own start-up.
`RADT_EXT_TIMINGS` makes radt-ext write the time of each of its steps, `RADT_EXT_WORKLOAD_TIMINGS` makes
the matmul write its own (imports, device found, run joined, load started and ended). The wall time beyond
the load is the command's wall time minus S; the table splits it into the workload's side (start,
imports, CUDA start, waiting for radt-ext's run, its end) and radt-ext's side after the workload (listeners,
the runs the workload opened, timelines, summaries, report, view, exit), with what ran alongside (MLflow's
import, the store's creation, the run's creation). Prints a markdown table and writes first_run.json and
first_run.md into --out.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (label, start key, end key): spans on one clock (time.time() of this host); "t0" is the command's start,
# "w_…" the workload's own times
WORKLOAD_SPANS = [
    ("radt-ext start → workload started", "t0", "began"),
    ("workload: Python start", "began", "w_started"),
    ("workload: imports", "w_started", "w_imported"),
    ("workload: device found (torch import, CUDA check)", "w_imported", "w_device_found"),
    ("workload: CUDA start, allocations (before: and the run joined)", "w_device_found", "w_load_started"),
    ("workload: the load", "w_load_started", "w_load_ended"),
    ("workload: metrics logged, run ended", "w_load_ended", "w_logged"),
    ("workload: exit", "w_logged", "workload_ended"),
    ("alongside (workload): MLflow import", "w_load_started", "w_mlflow_imported"),
    ("alongside (workload): radt-ext's run joined", "w_mlflow_imported", "w_run_joined"),
]
RADT_SPANS = [
    ("radt-ext: Python start and imports", "t0", "cli_imported"),
    ("radt-ext: checks without MLflow", "cli_imported", "checked"),
    ("alongside: MLflow import", "workload_started", "mlflow_imported"),
    ("alongside: a fresh store's tables made", "mlflow_imported", "store_made"),
    ("alongside: store reached", "store_made", "store_connected"),
    ("alongside: run created and described", "store_connected", "run_created"),
    ("after: listeners closed, points flushed", "workload_ended", "listeners_closed"),
    ("after: the workload's runs closed", "listeners_closed", "workload_runs_closed"),
    ("after: summaries computed, timelines artifact logged", "workload_runs_closed", "timelines_logged"),
    ("after: summaries and status logged", "timelines_logged", "summaries_logged"),
    ("after: report", "summaries_logged", "report_logged"),
    ("after: comparison view", "report_logged", "view_refreshed"),
    ("after: exit", "ended", "exited"),
]


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RADT_EXT_"))}
    if "RADT_EXT_NVML_REPLAY" in os.environ:
        env["RADT_EXT_NVML_REPLAY"] = os.environ["RADT_EXT_NVML_REPLAY"]
    env.update({"HOME": str(work), "RADT_EXT_SPOOL_DIR": str(work / "spool"),
                "RADT_EXT_TIMINGS": str(work / "radt_ext.json"),
                "RADT_EXT_WORKLOAD_TIMINGS": str(work / "workload.json")})
    return env


def one_run(seconds: float, timeout: float) -> dict:
    work = Path(tempfile.mkdtemp(prefix="radt-first-run-"))
    try:
        workload = [sys.executable, "-m", "radt_ext.workloads.matmul", "--seconds", f"{seconds:g}"]
        wrapper = ["sh", "-c", f'date +%s.%N > {work / "began"}; exec "$@"', "sh", *workload]
        argv = [sys.executable, "-m", "radt_ext.cli", "run", "--run-name", "first", "--", *wrapper]
        load = os.getloadavg()[0]
        t0 = time.time()
        proc = subprocess.run(argv, env=_env(work), cwd=work, capture_output=True, text=True, timeout=timeout)
        exited = time.time()
        if proc.returncode != 0:
            raise RuntimeError(f"exit code {proc.returncode}: {proc.stderr[-2000:]}")
        t = {"t0": t0, "exited": exited, "began": float((work / "began").read_text())}
        t.update(json.loads((work / "radt_ext.json").read_text()))
        t.update({f"w_{k}": v for k, v in json.loads((work / "workload.json").read_text()).items()})
        out = {"wall_s": exited - t0, "beyond_load_s": exited - t0 - seconds, "load_average": load,
               "spans": {}, "last_line": proc.stderr.strip().splitlines()[-2:]}
        for label, a, b in WORKLOAD_SPANS + RADT_SPANS:
            if a in t and b in t:
                out["spans"][label] = t[b] - t[a]
        out["workload_start_s"] = t["began"] - t0
        out["after_workload_s"] = exited - t["workload_ended"]
        out["workload_setup_s"] = t["w_load_started"] - t["began"]
        # what radt-ext adds: the wall less the load and less the workload's own start-up (Python, its
        # imports, torch, CUDA), which radt-ext cannot shorten
        out["radt_ext_share_s"] = (t["began"] - t0) + (exited - t["w_load_ended"])
        out["times"] = t
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _machine() -> dict:
    info = {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine(),
            "nvml_replay": os.environ.get("RADT_EXT_NVML_REPLAY")}
    try:
        info["gpu"] = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                     text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        info["gpu"] = None
    try:
        import mlflow

        info["mlflow"] = mlflow.__version__
    except ImportError:
        pass
    return info


def render(r: dict) -> str:
    runs = r["runs"]
    med = lambda key: statistics.median(x[key] for x in runs)  # noqa: E731
    env = r["environment"]
    lines = [f"### README command 1 on a fresh store ({r['label']})", "",
             f"`{r['command']}` — {env['gpu'] or 'no GPU'}, {env['cpus']} CPUs, Python {env['python']}, "
             f"MLflow {env.get('mlflow', '?')}; load average at each start: "
             + ", ".join(f"{x['load_average']:.1f}" for x in runs), "",
             "| figure | median | runs |", "| --- | --- | --- |"]
    keys = [k for k in runs[0] if isinstance(runs[0][k], float)]
    for key, label in (("wall_s", "wall time"), ("beyond_load_s", f"**beyond the {r['seconds']:g} s load**"),
                       ("workload_start_s", "workload started after the command"),
                       ("workload_setup_s", "workload's start → its load (its own start-up: Python, imports, "
                                            "torch, CUDA)"),
                       ("radt_ext_share_s", "**beyond the load and the workload's own start-up**"),
                       ("after_workload_s", "workload's exit → radt-ext's exit")):
        if key in keys:
            lines.append(f"| {label} | {med(key):.2f} s | " + ", ".join(f"{x[key]:.2f}" for x in runs) + " |")
    lines += ["", "Where the time goes (seconds, median of the runs; \"alongside\" runs while the workload does):",
              "", "| span | s |", "| --- | --- |"]
    for label, _, _ in WORKLOAD_SPANS + RADT_SPANS:
        vals = [x["spans"][label] for x in runs if label in x["spans"]]
        if vals:
            lines.append(f"| {label} | {statistics.median(vals):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="the matmul's --seconds")
    ap.add_argument("--label", default="now", help="names the table (e.g. before, after)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one run may take")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"command": " ".join(["python", "-m", "benchmarks.startup.first_run", *(argv if argv is not None else sys.argv[1:])]),
              "label": args.label, "seconds": args.seconds, "environment": _machine(), "runs": []}
    for i in range(args.repeats):
        result["runs"].append(one_run(args.seconds, args.timeout))
        print(f"first_run: run {i + 1}: {result['runs'][-1]['wall_s']:.2f} s", file=sys.stderr, flush=True)
        (out / "first_run.json").write_text(json.dumps(result, indent=2) + "\n")
    md = render(result)
    (out / "first_run.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
