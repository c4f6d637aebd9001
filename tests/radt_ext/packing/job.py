"""A queue job for the packing tests: busy on the CPU for --seconds, reporting progress; while the file
--hold-if names exists it keeps going until it is stopped (so a test can interrupt it mid-run, then let
the same command, with the same sweep hash, finish on the re-run)."""
import argparse
import os
import time

import radt_ext

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=0.5)
ap.add_argument("--hold-if", default="")
ap.add_argument("--started", default="", help="a file to create once running")
ap.add_argument("--env-to", default="", help="a file to append this job's MPS thread percentage to")
ap.add_argument("--cpus-to", default="", help="a file to append the CPUs this job may run on to, at its end")
args = ap.parse_args()
if args.started:
    open(args.started, "w").close()
if args.env_to:
    with open(args.env_to, "a") as fh:
        fh.write(f"{os.getpid()} {os.environ.get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE', '-')}\n")
start = time.time()
while time.time() - start < args.seconds or (args.hold_if and os.path.exists(args.hold_if)):
    x = sum(range(20000))
    radt_ext.log_progress(samples=8, steps=1)
if args.cpus_to:
    with open(args.cpus_to, "a") as fh:
        fh.write(f"{os.getpid()} {','.join(map(str, sorted(os.sched_getaffinity(0))))}\n")
