"""One listing of the workload's tree serves every listener that asks within its age; a fresh one sees
a child started since."""
import os
import subprocess
import sys

import psutil

from listeners import process_tree as tree


def test_a_listing_is_shared_within_its_age_and_made_again_when_asked_fresh():
    root = psutil.Process(os.getpid())
    first = tree.members(root, max_age=0.0)
    assert tree.members(root, max_age=60.0) is first
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid not in {p.pid for p in tree.members(root, max_age=60.0)}  # the shared, older listing
        assert child.pid in {p.pid for p in tree.members(root, max_age=0.0)}
        assert child.pid in tree.pids(os.getpid(), max_age=60.0)  # the fresh listing is the shared one now
    finally:
        child.kill()
        child.wait()
    assert tree.pids(None) == set()
