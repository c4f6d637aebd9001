"""Runs one command as a child and writes, as JSON into the file named first, when this wrapper started, when
the child ended, its exit code and the last line it printed (its stdout goes to FILE.out). The same wrapper
runs in every configuration, plain too, so what it costs cancels; it imports nothing of radt-ext or benchmarks.

    python stamp.py FILE -- python script.py ARGS
"""
import json
import subprocess
import sys
import time

started = time.time()
path, cmd = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
with open(path + ".out", "w") as out:
    rc = subprocess.call(cmd, stdout=out)
ended = time.time()
with open(path + ".out") as fh:
    lines = [line.strip() for line in fh if line.strip()]
with open(path, "w") as fh:
    json.dump({"started": started, "ended": ended, "rc": rc, "last": lines[-1] if lines else ""}, fh)
sys.exit(rc)
