"""A plain-pass test job: writes what it saw (its start and end, CUDA_VISIBLE_DEVICES, radt-ext's and
MLflow's variables, PYTHONPATH) to --out, sleeps --seconds (or while --hold-if exists), exits --exit."""
import argparse
import json
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--seconds", type=float, default=0.3)
ap.add_argument("--exit", type=int, default=0)
ap.add_argument("--hold-if", default="")
args = ap.parse_args()
seen = {"started": time.time(), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "vars": sorted(k for k in os.environ if k.startswith(("RADT_EXT_", "MLFLOW_"))),
        "pythonpath": os.environ.get("PYTHONPATH", ""), "modules": "radt_ext" in sys.modules}
with open(args.out + ".started", "w") as fh:
    json.dump(seen, fh)
print(f"plain job {os.path.basename(args.out)} says hello", flush=True)
start = time.time()
while time.time() - start < args.seconds or (args.hold_if and os.path.exists(args.hold_if)):
    time.sleep(0.02)
seen["ended"] = time.time()
with open(args.out, "w") as fh:
    json.dump(seen, fh)
sys.exit(args.exit)
