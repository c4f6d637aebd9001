"""A CPU job for the guard's tests: pinned to one CPU (so two of them slow each other down), a fixed
number of steps of fixed work, each reported with `radt_ext.log_progress`.

    python guard_job.py --steps 150 [--cpu 0] [--start-s 2] [--stopped-file FILE]
"""
import argparse
import os
import time

import radt_ext

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=150)
ap.add_argument("--work", type=int, default=150000, help="additions per step")
ap.add_argument("--cpu", type=int, default=0)
ap.add_argument("--start-s", type=float, default=0.0, help="a start-up of this long before its first step")
args = ap.parse_args()
time.sleep(args.start_s)
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {args.cpu})
with radt_ext.phase("train"):
    for _ in range(args.steps):
        x = 0
        for k in range(args.work):
            x += k
        radt_ext.log_progress(samples=1, steps=1)
