"""SIGINT/SIGTERM reach radt-ext's stopping code through a relay thread (radt_ext/run/signals.py).

A handler interrupts the main thread anywhere, also while it holds a lock that stopping needs (a
process tree's, while a workload starts). Stopping in the handler itself once deadlocked
`radt-ext collocate` (a hang of test_quit_on_sigterm). Real signals to this test process throughout.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import psutil
from mlflow.tracking import MlflowClient

from radt_ext.collocation import Group, Workload, run_group
from radt_ext.run.session import WorkloadSession, WorkloadSpec
from radt_ext.run.signals import SignalRelay
from tests.radt_ext.collocation.support import cpu_command


def test_a_signal_while_the_main_thread_holds_the_lock_stopping_needs():
    lock = threading.Lock()
    handled = []

    def stop(signum):
        with lock:
            handled.append((signum, threading.current_thread().name))

    before = signal.getsignal(signal.SIGTERM)
    with SignalRelay(stop) as relay:
        with lock:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)  # the handler runs here, in the main thread, which holds the lock
            assert relay.received == signal.SIGTERM and handled == []
        deadline = time.time() + 10
        while not handled and time.time() < deadline:
            time.sleep(0.01)
    assert handled == [(signal.SIGTERM, "radt-signals")]
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back


def test_a_callback_that_fails_does_not_stop_the_relay():
    seen = []

    def flaky(signum):
        seen.append(signum)
        if len(seen) == 1:
            raise RuntimeError("first one fails")

    with SignalRelay(flaky):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.time() + 10
        while len(seen) < 2 and time.time() < deadline:
            time.sleep(0.01)
    assert seen == [signal.SIGINT, signal.SIGTERM]


def test_stopped_before_it_spawned_the_workload_ends_at_once(tracking_uri):
    session = WorkloadSession(WorkloadSpec(command=cpu_command(60), listeners="top", interval=0.1,
                                           experiment_name="signals"))
    session.prepare()
    session.terminate(signal.SIGTERM)  # as the relay does when the signal beats the spawn
    session.start()
    assert session.wait() == -signal.SIGTERM  # the signal ended it, not its 60 s
    session.finish()
    assert MlflowClient(tracking_uri).get_run(session.run_id).info.status == "KILLED"


def _signal_self_when(condition, timeout: float = 60) -> threading.Thread:
    def watch():
        deadline = time.time() + timeout
        while time.time() < deadline:
            if condition():
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _workloads_running() -> int:
    return sum("cpu_workload.py" in " ".join(p.cmdline()) for p in psutil.Process().children(recursive=True)
               if p.is_running())


def test_sigterm_during_an_exclusive_group_never_starts_the_next(tracking_uri):
    g = Group(mode="exclusive", experiment_name="signals", interval=0.1, listeners="",
              workloads=[Workload(f"w{i}", cpu_command(60), device="cpu") for i in range(2)])
    before = signal.getsignal(signal.SIGTERM)
    watcher = _signal_self_when(lambda: _workloads_running() >= 1)
    result = run_group(g, echo=lambda m: None)
    watcher.join(5)
    assert result.status == "KILLED" and result.exit_code == 128 + signal.SIGTERM
    assert [c.status for c in result.children] == ["KILLED", "KILLED"]
    assert result.children[0].returncode == -signal.SIGTERM  # the signal ended it, not its 60 s
    assert not result.children[1].started  # the second never ran
    client = MlflowClient(tracking_uri)
    assert {client.get_run(c.run_id).info.status for c in result.children} == {"KILLED"}
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back


def test_sigterm_while_a_naive_group_runs_stops_both(tracking_uri):
    g = Group(mode="naive", experiment_name="signals", interval=0.1, listeners="",
              workloads=[Workload(f"w{i}", cpu_command(60), device="cpu") for i in range(2)])
    watcher = _signal_self_when(lambda: _workloads_running() >= 2)
    result = run_group(g, echo=lambda m: None)
    watcher.join(5)
    assert result.status == "KILLED" and [c.status for c in result.children] == ["KILLED", "KILLED"]
    assert [c.returncode for c in result.children] == [-signal.SIGTERM] * 2  # the signal ended them


def test_wait_child_sees_the_exit_when_it_comes_and_honours_its_timeout():
    """Popen.wait(timeout) polls (up to 50 ms late); wait_child sleeps on the child's pidfd. Real children."""
    import subprocess
    import sys

    import pytest

    from radt_ext.run.signals import wait_child

    child = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(0.3); sys.exit(3)"])
    assert wait_child(child) == 3 and child.returncode == 3
    slow = subprocess.Popen(["sleep", "5"])
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        wait_child(slow, timeout=0.2)
    assert time.monotonic() - started < 2  # the timeout, not the child's end
    slow.kill()
    assert wait_child(slow) == -signal.SIGKILL
