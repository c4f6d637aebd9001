"""A tiny CPU workload for collocation/sweep tests: busy for --seconds, reporting samples.

    python cpu_workload.py --seconds 0.8 --batch-size 32 [--stamp FILE [--together N]] [--exit 0]

--together N: start the work once N workloads have written the stamp file (their active phases overlap
however late each one starts).
"""
import argparse
import os
import sys
import time

import radt_ext

parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=float, default=0.8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--stamp", default="")
parser.add_argument("--exit", type=int, default=0)
parser.add_argument("--together", type=int, default=0)
args = parser.parse_args()
start = time.time()
if args.stamp:
    with open(args.stamp, "a") as fh:
        fh.write(f"{os.getpid()} {start} {args.batch_size} {os.environ.get('CUDA_MPS_PIPE_DIRECTORY') or '-'} "
                 f"{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>') or '-'} "
                 f"{os.environ.get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE') or '-'}\n")
deadline = time.time() + 60
while args.together and time.time() < deadline:
    with open(args.stamp) as fh:
        if sum(1 for line in fh if line.strip()) >= args.together:
            break
    time.sleep(0.01)
start = time.time()
x = 0
while time.time() - start < args.seconds:
    for _ in range(20000):
        x += 1
    radt_ext.log_progress(samples=args.batch_size, steps=1)
sys.exit(args.exit)
