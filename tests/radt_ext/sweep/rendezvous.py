"""A workload that finishes only when the workloads of every lane are running at once.

    python rendezvous.py --dir D --round R --lanes 0,1 [--timeout 60] [--hold]

It writes D/R-<its CUDA_VISIBLE_DEVICES> (and D/devices-<--name>: the same value) and waits until D/R-<lane> exists for every lane; run one
after another, the first would wait for the second for ever, so it gives up after --timeout seconds
with exit code 3 (its variant FAILED). With --hold it then keeps running until it is stopped.
"""
import argparse
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--dir", required=True)
parser.add_argument("--round", required=True)
parser.add_argument("--lanes", required=True)
parser.add_argument("--timeout", type=float, default=60)
parser.add_argument("--hold", action="store_true")
parser.add_argument("--name", default="", help="a label only (variants that differ by it alone)")
args = parser.parse_args()
me = os.environ.get("CUDA_VISIBLE_DEVICES", "")
with open(os.path.join(args.dir, f"{args.round}-{me}"), "w") as fh:
    fh.write(f"{os.getpid()} {time.time()}\n")
if args.name:
    with open(os.path.join(args.dir, f"devices-{args.name}"), "w") as fh:
        fh.write(me)
deadline = time.monotonic() + args.timeout
while not all(os.path.exists(os.path.join(args.dir, f"{args.round}-{lane}")) for lane in args.lanes.split(",")):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.05)
while args.hold:
    time.sleep(0.2)
