"""The GPU proof's workload for energy over short spans: a steady bf16 matmul load (numpy on a CPU)
for --seconds, during which the script opens runs of its own, each for its own stretch:

    python3 benchmarks/energy/energy_runs_workload.py --seconds 12 --run three:2:3 --run six:5.5:6

(`name:start:length`, seconds since the load began), as a training script opens a run per trial.
"""
from __future__ import annotations

import argparse
import time

import mlflow

from benchmarks.load import matmul


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--run", action="append", default=[], help="name:start_s:length_s")
    args = ap.parse_args()
    plan = sorted((float(s), float(n), name) for name, s, n in (r.split(":") for r in args.run))
    mm, sync, _ = matmul(cpu_size=384)
    mlflow.set_experiment("energy-spans")
    start, active = time.time(), None
    while time.time() - start < args.seconds:
        now = time.time() - start
        if active and now >= active[1]:
            mlflow.end_run()
            print(f"run {active[0]} ended at {now:.2f} s", flush=True)
            active = None
        if not active and plan and now >= plan[0][0]:
            begin, length, name = plan.pop(0)
            mlflow.start_run(run_name=name)
            active = (name, now + length)
            print(f"run {name} started at {now:.2f} s", flush=True)
        for _ in range(4):
            mm()
        sync()
    if active:
        mlflow.end_run()


if __name__ == "__main__":
    main()
