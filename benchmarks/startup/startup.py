"""What `radt-ext run` costs around a workload: when the workload starts, how much later it returns,
and where that time goes.

    python -m benchmarks.startup.startup --out results [--repeats 5] [--sleep-s 5] [--matmul-s 10]

Every figure comes from fresh processes of the real CLI into one SQLite store (made, with its
experiment, before the first timed run; a first run into a new store: benchmarks/startup/first_run.py):
- `import_s`: `import radt_ext.cli` and (unless --no-mlflow-import) `import mlflow` in a fresh interpreter;
- `start_latency_s`: from the moment `radt-ext run` is started to the workload's first instruction
  (`date +%s.%N` in a `sh -c` wrapper that then execs the workload): --repeats runs of a workload that
  ends at once (reports off), plus every timed run below; the figure is their median;
- `return_overhead_s`: `radt-ext run -l top -- sleep S` (report on) minus S and a `sleep 0`'s wall;
- `split`: one run in-process (`WorkloadSession.run()`) with the time of each step: imports, the checks
  that need no MLflow, the workload's start, the listeners' start, the store (MLflow's import and
  connection), the run's creation, the listeners' close, the summaries and the report;
- `matmul_s` (with --matmul-s): README command 1, `radt-ext run -- python -m radt_ext.workloads.matmul
  --seconds S`, wall time, against the workload alone.
Prints a markdown table and writes startup.json and startup.md into --out.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RADT = [sys.executable, "-m", "radt_ext.cli"]


def _env(store: str, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RADT_EXT_"))}
    env.update({"MLFLOW_TRACKING_URI": store, "MLFLOW_EXPERIMENT_NAME": "startup"}, **extra)
    return env


def _timed(argv, env, timeout=300) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.time()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    return time.time() - t0, proc


def import_times(mlflow: bool = True) -> dict[str, float]:
    out = {}
    for name, code in (("radt_ext.cli", "import radt_ext.cli"), ("mlflow", "import mlflow"))[:2 if mlflow else 1]:
        out[name] = _timed([sys.executable, "-c", code], dict(os.environ))[0]
    return out


LATENCIES: list[float] = []  # the workload's start after `radt-ext run`, from every timed run


def stamped_run(store: str, tmp: Path, options: list[str], workload: list[str], timeout=300, **env) -> float:
    """`radt-ext run OPTIONS -- WORKLOAD` whose workload first writes the time it began; returns the wall
    time and keeps the start latency in LATENCIES."""
    stamp = tmp / "began"
    stamp.unlink(missing_ok=True)
    wrapper = ["sh", "-c", f'date +%s.%N > {stamp}; exec "$@"', "sh", *workload]
    wall, proc = _timed(RADT + ["run", *options, "--", *wrapper], _env(store, **env), timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    LATENCIES.append(float(stamp.read_text()) - (time.time() - wall))
    return wall


def _listeners(listeners: str) -> list[str]:
    return ["-l", listeners] if listeners else []  # "": radt-ext's defaults


def start_latency(store: str, tmp: Path, listeners: str) -> float:
    stamped_run(store, tmp, _listeners(listeners), ["true"], RADT_EXT_REPORT="0")
    return LATENCIES[-1]


def return_overhead(store: str, tmp: Path, seconds: float, listeners: str) -> dict[str, float]:
    alone = seconds + _timed(["sleep", "0"], _env(store))[0]
    wrapped = stamped_run(store, tmp, _listeners(listeners), ["sleep", str(seconds)])
    return {"alone_s": alone, "under_radt_ext_s": wrapped, "overhead_s": wrapped - alone}


SPLIT_CHILD = """
import json, sys, time
t0 = time.time()
from radt_ext.run.session import WorkloadSession, WorkloadSpec
imported = time.time()
session = WorkloadSession(WorkloadSpec(command=sys.argv[2:], listeners=sys.argv[1] or None))
session.run()
t = dict(session.timings, process_started=t0, imported=imported, ended=time.time())
print(json.dumps(t))
"""
STEPS = [("imported", "imports (radt_ext.run.session)"), ("checked", "checks without MLflow (listeners, store probe)"),
         ("workload_started", "workload started"), ("listeners_started", "listeners and writer started"),
         ("store_connected", "store reached (MLflow imported, client connected)"),
         ("run_created", "run created and described"), ("workload_ended", "workload ran"),
         ("listeners_closed", "listeners closed, points flushed"), ("summaries_logged", "summaries and tags logged"),
         ("report_logged", "report built and logged"), ("ended", "session ended")]


def split(store: str, seconds: float, listeners: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", SPLIT_CHILD, listeners, "sleep", str(seconds)], env=_env(store),
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    t = json.loads(proc.stdout.strip().splitlines()[-1])
    out, last = {}, t["process_started"]
    for key, _ in STEPS:
        if key in t:
            out[key] = round(t[key] - last, 4)
            last = t[key]
    return out


def matmul(store: str, tmp: Path, seconds: float, alone: bool) -> dict[str, float]:
    cmd = [sys.executable, "-m", "radt_ext.workloads.matmul", "--seconds", str(seconds)]
    out = {"under_radt_ext_s": stamped_run(store, tmp, ["--run-name", "first"], cmd, timeout=600)}
    if alone:
        out["alone_s"] = _timed(cmd, _env(store))[0]
    return out


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sleep-s", type=float, default=5.0)
    ap.add_argument("--sleep-repeats", type=int, default=1)
    ap.add_argument("--listeners", default="top", help="for the latency and return figures (\"\": the defaults)")
    ap.add_argument("--matmul-s", type=float, default=None, help="also time README command 1 with this --seconds")
    ap.add_argument("--matmul-alone", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the matmul without radt-ext")
    ap.add_argument("--split", action=argparse.BooleanOptionalAction, default=True,
                    help="one run in-process, timed step by step")
    ap.add_argument("--mlflow-import", action=argparse.BooleanOptionalAction, default=True,
                    help="also time `import mlflow` alone")
    ap.add_argument("--store", default=None, help="default: a SQLite file in a fresh temporary directory")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="radt-startup-"))
    store = args.store or f"sqlite:///{tmp / 'mlflow.db'}"
    result = {"command": " ".join([os.path.basename(sys.executable), "-m", "benchmarks.startup.startup", *(argv or sys.argv[1:])]),
              "environment": {"python": platform.python_version(), "machine": platform.machine(),
                              "cpus": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
                              "load_before": _load(), "nvml_replay": os.environ.get("RADT_EXT_NVML_REPLAY")}}

    def step(name, fn):
        t = time.time()
        try:
            result[name] = fn()
        except Exception as exc:  # one part failing leaves the others
            result[name] = {"error": str(exc).splitlines()[-1] if str(exc) else type(exc).__name__}
        print(f"startup: {name} took {time.time() - t:.1f} s", file=sys.stderr, flush=True)
        (out / "startup.json").write_text(json.dumps({**result, "start_latency_s": LATENCIES}, indent=2) + "\n")

    step("import_s", lambda: import_times(args.mlflow_import))
    # the store and the experiment exist before the timed runs (a new one is made before its first workload)
    step("first_run_s", lambda: _timed(RADT + ["run", "-l", args.listeners, "--", "true"], _env(store, RADT_EXT_REPORT="0"))[0])
    step("start_latency_runs_s", lambda: [start_latency(store, tmp, args.listeners) for _ in range(args.repeats)])
    step("return_overhead", lambda: [return_overhead(store, tmp, args.sleep_s, args.listeners)
                                     for _ in range(args.sleep_repeats)])
    if args.split:
        step("split", lambda: split(store, 1.0, args.listeners))
    if args.matmul_s:
        step("matmul", lambda: matmul(store, tmp, args.matmul_s, args.matmul_alone))
    result["environment"]["load_after"] = _load()
    result["start_latency_s"] = LATENCIES
    if LATENCIES:
        result["start_latency_median_s"] = statistics.median(LATENCIES)
    ret = result.get("return_overhead")
    if isinstance(ret, list) and ret:
        result["return_overhead_median_s"] = statistics.median(r["overhead_s"] for r in ret)
    (out / "startup.json").write_text(json.dumps(result, indent=2) + "\n")
    md = render(result, args)
    (out / "startup.md").write_text(md)
    print(md)
    return 0


def render(r: dict, args) -> str:
    env = r["environment"]
    lines = ["### What `radt-ext run` costs around a workload", "",
             f"`{r['command']}` — Python {env['python']}, {env['cpus']} CPUs, load average before "
             f"{env['load_before']}, after {env['load_after']}", "",
             "| figure | value |", "| --- | --- |"]
    imp = r.get("import_s", {})
    if "radt_ext.cli" in imp:
        mlflow = f" / {imp['mlflow']:.2f} s" if "mlflow" in imp else ""
        lines.append(f"| `import radt_ext.cli`{' / `import mlflow`' if mlflow else ''}, fresh interpreter | "
                     f"{imp['radt_ext.cli']:.2f} s{mlflow} |")
    if "start_latency_median_s" in r:
        lat = ", ".join(f"{x:.2f}" for x in r["start_latency_s"])
        lines.append(f"| workload start after `radt-ext run`, median of {len(r['start_latency_s'])} runs "
                     f"| **{r['start_latency_median_s']:.2f} s** ({lat}) |")
    if "return_overhead_median_s" in r:
        one = r["return_overhead"][0]
        walls = ", ".join(f"{x['under_radt_ext_s']:.2f}" for x in r["return_overhead"])
        lines.append(f"| `radt-ext run -l {args.listeners} -- sleep {args.sleep_s:g}` returns later than `sleep` "
                     f"alone, median of {len(r['return_overhead'])} | **{r['return_overhead_median_s']:.2f} s** "
                     f"({walls} s vs "
                     f"{one['alone_s']:.2f} s) |")
    m = r.get("matmul")
    if isinstance(m, dict) and "under_radt_ext_s" in m:
        alone = f" (alone: {m['alone_s']:.1f} s)" if "alone_s" in m else ""
        lines.append(f"| README command 1 (`radt-ext run -- python -m radt_ext.workloads.matmul --seconds "
                     f"{args.matmul_s:g}`), wall | **{m['under_radt_ext_s']:.1f} s**{alone} |")
    for name in ("import_s", "first_run_s", "start_latency_runs_s", "return_overhead", "split", "matmul"):
        if isinstance(r.get(name), dict) and "error" in r[name]:
            lines.append(f"| {name} | failed: {r[name]['error']} |")
    s = r.get("split")
    if isinstance(s, dict) and "error" not in s:
        lines += ["", f"One `-l {args.listeners} -- sleep 1` run in-process, each step's seconds after the previous one:",
                  "", "| step | s |", "| --- | --- |"]
        lines += [f"| {label} | {s[key]:.3f} |" for key, label in STEPS if key in s]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
