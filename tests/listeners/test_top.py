"""top listener against real processes: the workload's tree is counted, an unrelated process is not."""
from __future__ import annotations

import subprocess
import sys
import time

import psutil

from listeners.base import Target
from listeners.top import TopListener
from standins import HERE

IDLE = "import time\ntime.sleep(5)"


def test_tree_with_grandchild_is_counted_and_a_stranger_is_not(tmp_path):
    stranger = subprocess.Popen([sys.executable, "-c", IDLE])  # another python on the host
    workload = subprocess.Popen([sys.executable, str(HERE / "workload_tree.py"), "2.5", str(tmp_path / "out")])
    listener = TopListener(Target(pid=workload.pid), 0.4)
    listener.open()
    samples = []
    try:
        while workload.poll() is None:
            time.sleep(0.4)
            samples.extend(r.values for r in listener.sample())
        samples.extend(r.values for r in listener.sample())  # after the tree is gone
    finally:
        listener.close()
        stranger.kill()
        stranger.wait()
    assert workload.returncode == 0
    counts = [s["proc_count"] for s in samples]
    assert max(counts) == 2  # workload + grandchild, never the stranger
    assert counts[-1] == 0
    cpu = [s["proc_cpu_pct"] for s in samples]
    assert max(cpu) > 25 and max(cpu) > 2 * cpu[0]  # busy loops (100 = one core; the CI box is shared)
    full = [s for s in samples if "proc_threads_count" in s]  # threads, I/O, host memory: about once a second
    assert 0 < len(full) < len(samples)
    assert max(s["proc_threads_count"] for s in full) >= 2
    # the grandchild's 2 MiB write survives its exit in the cumulative counter
    assert full[-1]["proc_write_mib"] >= 2.0
    for s in full:  # the host's CPU and memory come with them
        assert 0 <= s["host_cpu_pct"] <= 100
        assert 0 < s["host_mem_used_mib"] and 0 < s["host_mem_pct"] < 100
    assert not any("host_cpu_pct" in s for s in samples if "proc_threads_count" not in s)


def test_probe_and_host_only():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert "does not exist" in TopListener.probe(Target(pid=gone.pid if not psutil.pid_exists(gone.pid) else 2**22))
    listener = TopListener(Target(pid=None), 0.1)
    listener.open()
    [reading] = listener.sample()
    listener.close()
    assert set(reading.values) == {"host_cpu_pct", "host_mem_used_mib", "host_mem_pct"}


STEPPED = """import os, subprocess, sys
if sys.argv[1:] == ["child"]:
    print("ready", flush=True)
    sys.stdin.readline()  # go
    with open(sys.argv[0] + ".out", "wb") as f:
        f.write(os.urandom(2 * 1024 * 1024)); f.flush(); os.fsync(f.fileno())
    print("written", flush=True)
    sys.stdin.readline()  # exit
    sys.exit(0)
subprocess.Popen([sys.executable, sys.argv[0], "child"]).wait()
print("child gone", flush=True)
sys.stdin.readline()
"""


def test_io_of_members_that_exit_is_counted_once_and_never_drops(tmp_path):
    script = tmp_path / "stepped.py"
    script.write_text(STEPPED)
    workload = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    listener = TopListener(Target(pid=workload.pid), 1.0)  # every sample reads I/O at 1 s
    try:
        assert workload.stdout.readline() == "ready\n"
        listener.open()
        workload.stdin.write("go\n"), workload.stdin.flush()
        assert workload.stdout.readline() == "written\n"
        [alive] = listener.sample()
        workload.stdin.write("exit\n"), workload.stdin.flush()
        assert workload.stdout.readline() == "child gone\n"
        [after] = listener.sample()
        [later] = listener.sample()
        workload.stdin.write("\n"), workload.stdin.flush()
        assert workload.wait() == 0
        [final] = listener.sample()  # the root has left too: its reading (with the child's) stays
    finally:
        listener.close()
        workload.kill()
        workload.wait()
    assert [s.values["proc_count"] for s in (alive, after, final)] == [2, 1, 0]
    # cumulative, counted once: the parent's counters take in a child it has reaped (as Linux does)
    writes = [s.values["proc_write_mib"] for s in (alive, after, later, final)]
    assert 2.0 <= writes[0] <= writes[1] == writes[2] == writes[3] < 3.0, writes


SPAWNS = """
import subprocess, sys, time
print("ready", flush=True)
sys.stdin.readline()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
print("spawned", flush=True)
sys.stdin.readline()
child.kill()
"""


def test_a_child_started_later_is_counted_within_a_second(tmp_path):
    """The tree is listed again about once a second (each member's counters are read every sample)."""
    script = tmp_path / "spawns.py"
    script.write_text(SPAWNS)
    workload = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
    listener = TopListener(Target(pid=workload.pid), 0.1)
    try:
        assert workload.stdout.readline() == "ready\n"
        listener.open()
        [before] = listener.sample()
        workload.stdin.write("go\n"), workload.stdin.flush()
        assert workload.stdout.readline() == "spawned\n"
        spawned = time.monotonic()
        counts = []
        while time.monotonic() - spawned < 2.0 and 2 not in counts:
            time.sleep(0.1)
            counts += [r.values["proc_count"] for r in listener.sample()]
        seen_after = time.monotonic() - spawned
        workload.stdin.write("\n"), workload.stdin.flush()
        workload.wait(10)
    finally:
        listener.close()
        workload.kill()
        workload.wait()
    assert before.values["proc_count"] == 1
    assert 2 in counts and seen_after < 1.5, (counts, seen_after)
