"""Sampling capacity: how fast the GPU listeners can read, and what the monitor costs in CPU.

    python -m benchmarks.sampling.sampling --out docs/benchmarks/gpu

Part A, highest sustained rate: a listener's `sample()` called back to back for a few
seconds, for `nvml` restricted to power+energy, the full `nvml` listener and `gpm`.
Reported: calls/s, call latency, and how often the power and energy values actually
changed (the rate at which the driver publishes new readings).

Part B, CPU at 1, 10 and 20 Hz (and faster, to find the sustained limit):
  - `nvml` power+energy (1–100 Hz) and `gpm` (20, 50 Hz) through the real Recorder (monitor
    thread + MetricWriter into a SQLite store) in this process; CPU of the process less its idle
    main thread, and per thread from psutil (sampling thread, writer thread);
  - the real monitor process behind `radt_ext.track()` (`python -m radt_ext.run.monitor_process`)
    with `nvml`, with `gpm`, and with every available listener; CPU of that process and its
    children (nvidia-smi for `smi`), measured after it reported ready.
The achieved rate (samples logged / seconds) shows whether the rate was sustained.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from benchmarks.common import fmt, table, write_results

RATES_HZ = (1, 10, 20)


POWER_ENERGY = "nvml power+energy"
SINGLE = (POWER_ENERGY, "nvml", "gpm")  # what open_listener opens; any other kind is a listener set


def power_energy_listener(interval: float):
    """The `nvml` listener reading only power and energy (what a 20 Hz energy trace needs)."""
    from listeners.base import Target
    from listeners.nvml import NvmlListener

    lst = NvmlListener(Target(), interval)
    lst.open()
    lst._readers = [r for r in lst._readers if r.name.endswith(("_power_w", "_energy_j", "_fields"))]
    return lst


def open_listener(kind: str, interval: float = 0.1):
    from listeners.base import Target
    from listeners.gpm import GpmListener
    from listeners.nvml import NvmlListener
    from listeners.nvml_backend import reset

    reset()  # NVML replay only: each listener replays the trace from its start (its GPM buffer labels match)

    if kind == POWER_ENERGY:
        return power_energy_listener(interval)
    lst = (NvmlListener if kind == "nvml" else GpmListener)(Target(), interval)
    lst.open()
    return lst


def max_rate(kind: str, seconds: float) -> dict:
    lst = open_listener(kind)
    latencies: list[float] = []
    changes: dict[str, int] = {}
    last: dict[str, float] = {}
    empty = 0
    try:
        end = time.perf_counter() + seconds
        while True:
            t = time.perf_counter()
            if t >= end:
                break
            readings = lst.sample()
            latencies.append(time.perf_counter() - t)
            if not readings:
                empty += 1
            for reading in readings:
                for name, value in reading.values.items():
                    if last.get(name) != value:
                        changes[name] = changes.get(name, 0) + 1
                        last[name] = value
    finally:
        lst.close()
    n = len(latencies)
    lat = sorted(latencies)
    power = [v for k, v in changes.items() if k.endswith("_power_w")]
    energy = [v for k, v in changes.items() if k.endswith("_energy_j")]
    return {"listener": kind, "calls": n, "calls_per_s": n / seconds, "empty_readings": empty,
            "latency_ms_median": 1e3 * statistics.median(lat) if lat else float("nan"),
            "latency_ms_p99": 1e3 * lat[min(n - 1, int(0.99 * n))] if lat else float("nan"),
            "values_per_reading": len(last),
            "power_changes_per_s": power[0] / seconds if power else None,
            "energy_changes_per_s": energy[0] / seconds if energy else None}


def _thread_cpu(tids: dict[str, int]) -> dict[str, float]:
    times = {t.id: t.user_time + t.system_time for t in psutil.Process().threads()}
    return {name: times.get(tid, 0.0) for name, tid in tids.items()}


def recorder_cpu(kind: str, rate: float, seconds: float, settle: float, client, uri: str,
                 experiment_id: str) -> dict:
    """One listener (`nvml power+energy` or `gpm`) through the real Recorder (monitor thread + writer, SQLite);
    or, for a `+`-joined set such as `nvml+gpm+top` (`all`: every available one), those listeners as
    `--listeners` selects them, watching this process."""
    from listeners.base import Target
    from radt_ext.sampling.recorder import Recorder, select_listeners

    run = client.create_run(experiment_id, run_name=f"{kind}-{rate:g}hz")
    if kind not in SINGLE:
        spec = None if kind == "all" else kind.replace("+", ",")
        listeners, _ = select_listeners(spec, 1.0 / rate, Target(pid=os.getpid()))
    else:
        lst = open_listener(kind, 1.0 / rate)
        lst.open = lambda: None  # already open: open_listener() opened it (and picked the power+energy readers)
        listeners = [lst]
    recorder = Recorder(client, run.info.run_id, uri, listeners).start()
    time.sleep(settle)
    tids = {t.name.split("-")[1]: t.native_id for t in threading.enumerate() if t.name.startswith("radt-")}
    tids["main"] = threading.main_thread().native_id
    state = recorder.monitor.states[listeners[0].name]
    s0, c0, p0, t0 = state.samples, _thread_cpu(tids), _process_cpu(), time.perf_counter()
    time.sleep(seconds)
    s1, c1, p1, t1 = state.samples, _thread_cpu(tids), _process_cpu(), time.perf_counter()
    recorder.stop()
    client.set_terminated(run.info.run_id)
    wall = t1 - t0
    cpu = {name: 100.0 * (c1[name] - c0[name]) / wall for name in tids}
    # everything but the (sleeping) main thread: sampling thread, writer thread and its per-call helpers
    total = 100.0 * (p1 - p0) / wall - cpu.pop("main")
    return {"what": f"{kind} (Recorder in-process: sampling thread + writer, SQLite)", "rate_hz": rate,
            "achieved_hz": (s1 - s0) / wall, "cpu_pct_of_core": total,
            "cpu_pct_by_thread": cpu, "points_stored": recorder.writer.stored}


def _process_cpu() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


def _tree_cpu(proc: psutil.Process) -> dict[int, float]:
    out = {}
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            out[p.pid] = t.user + t.system
        except psutil.Error:
            pass
    return out


def monitor_process_cpu(listeners: str | None, rate: float, seconds: float, settle: float, client, uri: str,
                        experiment_id: str) -> dict:
    """The monitor process behind track(): CPU of it and its children while it samples at `rate`."""
    run = client.create_run(experiment_id, run_name=f"monitor-{listeners or 'all'}-{rate:g}hz")
    cmd = [sys.executable, "-m", "radt_ext.run.monitor_process", "--run-id", run.info.run_id, "--tracking-uri", uri,
           "--pid", str(os.getpid()), "--interval", str(1.0 / rate)]
    if listeners:
        cmd += ["--listeners", listeners]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline() or "{}")
        if not ready.get("ready"):
            raise RuntimeError(f"monitor process did not start: {ready}")
        ps = psutil.Process(proc.pid)
        time.sleep(settle)
        c0, t0 = _tree_cpu(ps), time.perf_counter()
        time.sleep(seconds)
        c1, t1 = _tree_cpu(ps), time.perf_counter()
        proc.stdin.close()
        final = proc.stdout.read()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    wall = t1 - t0
    cpu = sum(c1[pid] - c0.get(pid, 0.0) for pid in c1)
    children = sum(c1[pid] - c0.get(pid, 0.0) for pid in c1 if pid != proc.pid)  # nvidia-smi, dcgmi
    tags = client.get_run(run.info.run_id).data.tags
    samples = {k.split(".")[2]: int(v) for k, v in tags.items()
               if k.startswith("radt_ext.listener.") and k.endswith(".samples")}
    summary = {}
    for line in final.splitlines():
        if line.startswith("{"):
            summary = json.loads(line).get("summary", summary)
    span = summary.get("e2e_duration_s")  # the recorder's own start → stop
    return {"what": f"monitor process, listeners {listeners or 'all available'} ({','.join(ready['listeners'])})",
            "rate_hz": rate, "cpu_pct_of_core": 100.0 * cpu / wall, "children_cpu_pct_of_core": 100.0 * children / wall,
            "achieved_hz": {k: v / span for k, v in samples.items()} if span else None,
            "points_stored": int(tags.get("radt_ext.metrics_stored", 0)),
            "skipped": ready.get("skipped", {})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-rate-seconds", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=6.0, help="measured seconds per CPU configuration")
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--rates", default=",".join(str(r) for r in RATES_HZ))
    ap.add_argument("--power-energy-rates", default="1,10,20,50,100",
                    help="rates for nvml power+energy through the in-process Recorder")
    ap.add_argument("--gpm-rates", default="20,50", help="rates for gpm through the in-process Recorder")
    ap.add_argument("--process-listeners", default="nvml,gpm,all",
                    help="listener sets for the monitor process; 'all' = every available listener")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]

    from mlflow.tracking import MlflowClient

    uri = os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{os.path.join(tempfile.mkdtemp(prefix='radt-bench-'), 'mlflow.db')}"
    os.environ.setdefault("RADT_EXT_SPOOL_DIR", tempfile.mkdtemp(prefix="radt-bench-spool-"))
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(f"benchmark-sampling-{int(time.time())}")

    part_a = []
    for kind in SINGLE:
        try:
            part_a.append(max_rate(kind, args.max_rate_seconds))
        except Exception as exc:
            part_a.append({"listener": kind, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        print(part_a[-1], flush=True)

    part_b = []
    in_process = [(POWER_ENERGY, float(r)) for r in args.power_energy_rates.split(",") if r] + \
        [("gpm", float(r)) for r in args.gpm_rates.split(",") if r]
    for kind, rate in in_process:
        try:
            part_b.append(recorder_cpu(kind, rate, args.seconds, args.settle, client, uri, experiment_id))
        except Exception as exc:
            part_b.append({"what": f"{kind} (Recorder)", "rate_hz": rate,
                           "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        print(part_b[-1], flush=True)
    for listeners in args.process_listeners.split(","):
        for rate in rates:
            try:
                part_b.append(monitor_process_cpu(None if listeners == "all" else listeners, rate, args.seconds,
                                                  args.settle, client, uri, experiment_id))
            except Exception as exc:
                part_b.append({"what": f"monitor process, listeners {listeners}", "rate_hz": rate,
                               "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
            print(part_b[-1], flush=True)

    rows_a = [[a["listener"], fmt(a.get("calls_per_s"), 0), a.get("empty_readings", "–"),
               fmt(a.get("latency_ms_median"), 3),
               fmt(a.get("latency_ms_p99"), 3), a.get("values_per_reading", "–"),
               fmt(a.get("power_changes_per_s"), 1), fmt(a.get("energy_changes_per_s"), 1), a.get("error", "")]
              for a in part_a]

    def achieved(b):
        ach = b.get("achieved_hz")
        if isinstance(ach, dict):
            return ", ".join(f"{k} {v:.1f}" for k, v in sorted(ach.items()))
        return fmt(ach, 1)

    rows_b = [[b["what"], fmt(b["rate_hz"], 0), achieved(b), fmt(b.get("cpu_pct_of_core"), 2),
               b.get("points_stored", "–"), b.get("error", "")] for b in part_b]
    md = "\n".join([
        f"### Sampling capacity, part A: listener `sample()` back to back for {args.max_rate_seconds:g} s", "",
        table(["listener", "calls/s", "empty readings", "median ms", "p99 ms", "values per reading", "power changes/s",
               "energy changes/s", "error"], rows_a), "",
        f"### Sampling capacity, part B: monitor CPU ({args.seconds:g} s measured after {args.settle:g} s settle)",
        "", table(["what", "requested Hz", "achieved Hz (per listener)", "CPU % of one core", "points stored",
                   "error"], rows_b), ""])
    write_results(args.out, "sampling", {"max_rate": part_a, "cpu": part_b}, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
