"""A SIGTERM handler interrupts the main thread anywhere, also while it holds the lock of a process
tree it is starting. The handlers must return at once and stop the workloads from a thread: handling
the signal in place once deadlocked `radt-ext collocate` (seen as a hang of test_quit_on_sigterm)."""
from __future__ import annotations

import signal
import threading
import time

import psutil
from mlflow.tracking import MlflowClient

from radt_ext.collocation import Group, Workload
from radt_ext.collocation.group import GroupRunner
from radt_ext.session import WorkloadSession, WorkloadSpec
from tests.radt_ext.collocation.support import cpu_command


def _returns_within(fn, seconds: float) -> bool:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(seconds)
    return not t.is_alive()


def test_session_handler_returns_while_the_tree_lock_is_held(tracking_uri):
    session = WorkloadSession(WorkloadSpec(command=cpu_command(60), listeners="top", interval=0.1,
                                           experiment_name="signals"))
    session.prepare().start()
    t0 = time.time()
    with session.tree._lock:  # where the main thread is while ProcessTree.start() scans
        assert _returns_within(lambda: session.on_signal(signal.SIGTERM), 5)
    assert session.wait() == -signal.SIGTERM
    assert time.time() - t0 < 30  # not the workload's 60 s
    session.finish()
    assert MlflowClient(tracking_uri).get_run(session.run_id).info.status == "KILLED"


def test_group_handler_returns_while_a_tree_lock_is_held(tracking_uri):
    g = Group(mode="naive", experiment_name="signals", interval=0.1, listeners="",
              workloads=[Workload(f"w{i}", cpu_command(60), device="cpu") for i in range(2)])
    runner = GroupRunner(g, echo=lambda m: None)
    handled = []

    def signal_when_both_run():
        deadline = time.time() + 60
        while time.time() < deadline:
            running = [s for s in runner.sessions if s.proc is not None and getattr(s, "tree", None)]
            if len(running) == 2 and all(psutil.pid_exists(s.proc.pid) for s in running):
                with running[1].tree._lock:
                    handled.append(_returns_within(lambda: runner._on_signal(signal.SIGTERM, None), 5))
                return
            time.sleep(0.05)

    helper = threading.Thread(target=signal_when_both_run, daemon=True)
    helper.start()
    t0 = time.time()
    result = runner.run()
    helper.join(5)
    assert handled == [True]
    assert time.time() - t0 < 45  # not the workloads' 60 s
    assert result.status == "KILLED" and result.exit_code == 128 + signal.SIGTERM
    assert [c.status for c in result.children] == ["KILLED", "KILLED"]
    client = MlflowClient(tracking_uri)
    assert {client.get_run(c.run_id).info.status for c in result.children} == {"KILLED"}
