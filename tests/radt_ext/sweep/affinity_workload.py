"""Stands for a user's script: writes the CPUs it may use, those of its grandchild (a process its child
starts) and OMP_NUM_THREADS as a JSON line to the file given. Imports nothing of radt-ext."""
import json
import os
import subprocess
import sys

GRANDCHILD = ("import os, subprocess, sys; print(subprocess.run([sys.executable, '-c', "
              "'import os; print(sorted(os.sched_getaffinity(0)))'], capture_output=True, text=True).stdout)")

grandchild = subprocess.run([sys.executable, "-c", GRANDCHILD], capture_output=True, text=True, check=True)
line = {"pid": os.getpid(), "cpus": sorted(os.sched_getaffinity(0)), "grandchild": json.loads(grandchild.stdout),
        "omp": os.environ.get("OMP_NUM_THREADS")}
with open(sys.argv[1], "a") as fh:
    fh.write(json.dumps(line) + "\n")
if len(sys.argv) > 2:  # hold on for this long (a test kills the sweep meanwhile)
    import time

    time.sleep(float(sys.argv[2]))
