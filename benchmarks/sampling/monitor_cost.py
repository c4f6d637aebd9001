"""CPU of the monitor at 10 Hz: the `nvml` listener alone, and every available listener.

    python -m benchmarks.sampling.monitor_cost --seconds 10 --out docs/benchmarks/gpu/power_sampling

The real monitor process behind `radt_ext.track()` (`python -m radt_ext.run.monitor_process`, writing
into a SQLite store) runs with the listeners asked for at the rate asked for; its CPU and its
children's (nvidia-smi for `smi`) are measured over `--seconds` after it reported ready and
settled, with the GPU idle and under a bf16 matmul load (`benchmarks.load`). Then the `nvml`
listener alone through the in-process Recorder (GPU idle), split by thread (sampling thread,
writer thread), to show where the monitor's CPU goes. The result files are rewritten after every
configuration, so a run stopped by a timeout keeps what it measured.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from benchmarks.common import fmt, table, write_results
from benchmarks.load import gpu_load
from benchmarks.sampling.sampling import monitor_process_cpu, recorder_cpu


def monitor_rows(phase: str, sets: list[str], rate: float, seconds: float, settle: float, client, uri: str,
                 experiment_id: str, save) -> list[dict]:
    out = []
    for listeners in sets:
        try:
            row = monitor_process_cpu(None if listeners == "all" else listeners, rate, seconds, settle, client, uri,
                                      experiment_id)
        except Exception as exc:
            row = {"what": f"monitor process, listeners {listeners}", "rate_hz": rate,
                   "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        out.append({"phase": phase, "listeners": listeners, **row})
        print(out[-1], flush=True)
        save(out)
    return out


def by_thread(phase: str, listeners: str, rate: float, seconds: float, settle: float, client, uri: str,
              experiment_id: str) -> dict:
    try:
        row = recorder_cpu(listeners, rate, seconds, settle, client, uri, experiment_id)
    except Exception as exc:
        row = {"what": f"{listeners} (Recorder in-process)", "rate_hz": rate,
               "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    row = {"phase": phase, "listeners": f"{listeners} (in-process, by thread)", **row}
    print(row, flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds per configuration")
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=10.0, help="sampling rate in Hz (10 = interval 0.1 s)")
    ap.add_argument("--listeners", default="nvml,all", help="listener sets for the monitor process; all = every available")
    ap.add_argument("--phases", default="idle,load")
    ap.add_argument("--by-thread", action=argparse.BooleanOptionalAction, default=True,
                    help="then the nvml listener in-process, its CPU split by thread (GPU idle)")
    ap.add_argument("--by-thread-listeners", default="nvml",
                    help="listener sets for the in-process split, comma-separated; a set joins names with + "
                         "(nvml+gpm+top), all = every available")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)

    from mlflow.tracking import MlflowClient

    uri = os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{os.path.join(tempfile.mkdtemp(prefix='radt-bench-'), 'mlflow.db')}"
    os.environ.setdefault("RADT_EXT_SPOOL_DIR", tempfile.mkdtemp(prefix="radt-bench-spool-"))
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment(f"benchmark-monitor-cost-{int(time.time())}")
    sets = [s for s in args.listeners.split(",") if s]

    rows: list[dict] = []
    save = lambda more: write(args, rows + more)  # noqa: E731  (a timeout keeps what was measured)
    for phase in args.phases.split(","):
        if phase == "idle":
            rows += monitor_rows("idle", sets, args.rate, args.seconds, args.settle, client, uri, experiment_id, save)
        elif phase == "load":
            with gpu_load():
                rows += monitor_rows("load", sets, args.rate, args.seconds, args.settle, client, uri, experiment_id,
                                     save)
        else:
            ap.error(f"--phases: unknown phase {phase!r}; use idle, load")
    if args.by_thread:
        for listeners in [s for s in args.by_thread_listeners.split(",") if s]:
            rows.append(by_thread("idle", listeners, args.rate, args.seconds, args.settle, client, uri, experiment_id))
            save([])
    write(args, rows)
    return 0


def write(args, rows: list[dict]) -> None:
    def detail(r):
        if "cpu_pct_by_thread" in r:
            return ", ".join(f"{k} {v:.2f} %" for k, v in sorted(r["cpu_pct_by_thread"].items()))
        return ", ".join(r.get("what", "").split("(")[1:]).rstrip(")") if "(" in r.get("what", "") else ""

    md_rows = [[r["phase"], r["listeners"], fmt(r.get("rate_hz"), 0), fmt(r.get("cpu_pct_of_core"), 2),
                fmt(r.get("children_cpu_pct_of_core"), 2), r.get("points_stored", "–"), detail(r), r.get("error", "")]
               for r in rows]
    md = "\n".join([
        f"### Monitor CPU at {args.rate:g} Hz ({args.seconds:g} s measured after {args.settle:g} s settle)", "",
        table(["GPU", "listeners", "Hz", "CPU % of one core (process + children)", "of which children", "points stored",
               "listeners running / CPU by thread", "error"], md_rows), ""])
    write_results(args.out, "monitor_cost", {"rows": rows}, md)


if __name__ == "__main__":
    sys.exit(main())
