"""A tiny real workload for the top/perf tests: busy for a while, starts a busy child (the test's
grandchild) that first writes a small file, then waits for it. Usage: workload_tree.py SECONDS OUTFILE"""
import os
import subprocess
import sys
import time

seconds, outfile = float(sys.argv[1]), sys.argv[2]
if len(sys.argv) > 3 and sys.argv[3] == "child":
    with open(outfile, "wb") as f:
        f.write(os.urandom(2 * 1024 * 1024))
        f.flush()
        os.fsync(f.fileno())
    end = time.time() + seconds
    while time.time() < end:
        pass
    sys.exit(0)
time.sleep(1.0)  # an idle start, so the tests can see CPU rise
child = subprocess.Popen([sys.executable, __file__, str(seconds), outfile, "child"])
end = time.time() + seconds
while time.time() < end:
    pass
child.wait()
