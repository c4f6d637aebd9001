"""The guard beside a running group: real child processes pinned to one CPU slow each other down,
real SIGSTOP/SIGCONT of a companion's process tree, a real SQLite store for the group's runs."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from radt_ext.collocation import Group, Workload, run_group
from radt_ext.collocation import guard as guard_mod
from radt_ext.errors import UsageError

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "guard_job.py")

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")


def job(steps: int = 150) -> list[str]:
    return [sys.executable, JOB, "--steps", str(steps)]


def spawn(tmp_path, name: str, steps: int, env=None):
    path = str(tmp_path / f"{name}.jsonl")
    proc = subprocess.Popen(job(steps), env={**os.environ, "RADT_EXT_PROGRESS_FILE": path, **(env or {})},
                            start_new_session=True)
    return proc, path


def member(name, proc, path, rate):
    return guard_mod.Member(name, path, rate, pids=lambda: guard_mod.tree_pids(proc),
                            running=lambda: proc.poll() is None)


@contextlib.contextmanager
def guarding(g, procs):
    """The guard started; at the end stopped (nothing left paused) and every job waited for."""
    g.start()
    try:
        yield g
    finally:
        g.stop()
        for p in procs:
            p.wait()


def until_unhelped(g, proc, timeout: float = 120) -> None:
    """Until the guard gives up protecting `proc`'s job (pausing did not help it), or the job ends."""
    deadline = time.time() + timeout
    while not any(e.action == "unhelped" for e in g.events) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)


def watch_states(procs: dict, until) -> dict[str, set[str]]:
    """Each process's states (psutil) seen while `until()` is false."""
    seen = {n: set() for n in procs}
    while not until():
        for n, p in procs.items():
            try:
                seen[n].add(psutil.Process(p.pid).status())
            except psutil.Error:
                pass
        time.sleep(0.02)
    return seen


def test_a_job_beyond_the_bound_has_its_companion_stopped_and_continued_when_that_does_not_help(tmp_path):
    # the watched job's alone rate is set far above what it can do: beyond any bound at once, and still
    # beyond with its companion stopped (what slows it is not its companion): the companion runs again
    a, pa = spawn(tmp_path, "a", 300)
    b, pb = spawn(tmp_path, "b", 300)
    g = guard_mod.Guard([member("a", a, pa, 1e6), member("b", b, pb, None)], 1.5, window_s=1.0).start()
    states = watch_states({"b": b}, lambda: any(e.action == "unhelped" for e in g.events) or a.poll() is not None)
    time.sleep(0.2)
    states_after = watch_states({"b": b}, lambda: a.poll() is not None)
    b.wait()
    g.stop()
    assert a.returncode == 0 and b.returncode == 0  # stopped and continued, b still ran to its end
    assert psutil.STATUS_STOPPED in states["b"]  # the companion was stopped while a ran
    assert psutil.STATUS_STOPPED not in states_after["b"]  # and ran again while a still did
    actions = [(e.action, e.name) for e in g.events]
    assert actions == [("over", "a"), ("pause", "b"), ("unhelped", "a"), ("resume", "b")]  # a: never again
    assert g.summary("b")["guard_paused_s"] > 0 and g.summary("b")["guard_pauses"] == 1
    assert g.summary("a")["guard_live_slowdown_max"] > 1.5 and "guard_live_slowdown_max" not in g.summary("b")
    assert "over a live" in g.log_text() and "resume b: pausing did not help a (live " in g.log_text()


def test_jobs_within_the_bound_are_left_alone(tmp_path):
    a, pa = spawn(tmp_path, "a", 100)
    b, pb = spawn(tmp_path, "b", 100)
    g = guard_mod.Guard([member("a", a, pa, 1e-3), member("b", b, pb, 1e-3)], 1.5, window_s=1.0).start()
    states = watch_states({"a": a, "b": b}, lambda: a.poll() is not None and b.poll() is not None)
    g.stop()
    assert psutil.STATUS_STOPPED not in states["a"] | states["b"]
    assert g.events == [] and g.log_text() == "no action"
    assert g.summary("a")["guard_live_slowdown_max"] < 1.0  # it was read, and far within the bound


def test_a_job_holding_a_file_lock_is_not_left_stopped(tmp_path):
    """A companion stopped while it holds a lock (a SQLite store's) would stall every writer: it runs on."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"fh = open({str(tmp_path / 'lock')!r}, 'w'); fcntl.lockf(fh, fcntl.LOCK_EX)\n"
        "print('locked', flush=True); time.sleep(30)")], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert holder.pid in guard_mod.locked_pids()
        assert holder.pid in guard_mod.locked_pids([str(tmp_path / "lock")])
        assert holder.pid not in guard_mod.locked_pids([str(tmp_path / "store.db")])  # not a lock on the store
        g = guard_mod.Guard([member("h", holder, None, None)], 1.5)
        g._pause("h", "test", None)
        assert psutil.Process(holder.pid).status() != psutil.STATUS_STOPPED
        assert [e.action for e in g.events] == ["deferred"] and g.paused_s("h") == 0
    finally:
        holder.kill()
        holder.wait()


def runs(uri):
    client = MlflowClient(uri)
    found = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return ([r for r in found if "mlflow.parentRunId" not in r.data.tags],
            {r.data.tags.get("collocation.workload"): r for r in found if "mlflow.parentRunId" in r.data.tags})


def baseline(uri: str, rate: float) -> tuple[str, float]:
    """An exclusive run of a workload whose active phase did `rate` samples/s (the figure the guard
    compares with), as a group's baseline."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("guard") or client.get_experiment(client.create_experiment("guard"))
    run_id = client.create_run(exp.experiment_id, tags={"collocation.mode": "exclusive"}).info.run_id
    for key, value in (("active_s", 2.0), ("throughput_samples_per_s", rate), ("e2e_duration_s", 3.0)):
        client.log_metric(run_id, f"summary/{key}", value)
    client.set_terminated(run_id, "FINISHED")
    return run_id, 3.0


def test_a_guarded_group_leaves_the_pauses_out_of_the_slowdown_and_says_what_it_did(tracking_uri, tmp_path):
    # "victim" did far more alone than it can here: beyond the bound from its first window on
    baselines = {"victim": baseline(tracking_uri, 1e6), "companion": baseline(tracking_uri, 1e-3)}
    workloads = [Workload("victim", job(100), device="cpu"), Workload("companion", job(150), device="cpu")]
    lines = []
    result = run_group(Group("naive", workloads, experiment_name="guard", interval=0.2, baselines=baselines,
                             guard_slowdown=1.5), echo=lines.append)
    assert result.status == "FINISHED" and all(c.status == "FINISHED" for c in result.children)
    parents, kids = runs(tracking_uri)
    parent = next(p for p in parents if p.info.run_id == result.parent_run_id)
    text = parent.data.tags["collocation.guard"]
    assert text.startswith("max slowdown 1.5: ") and " over victim live " in text
    assert " pause companion " in text and " resume companion: " in text
    assert any(line.startswith("radt-ext guard: victim live slowdown") for line in lines)
    assert parent.data.metrics["summary/guard_paused_s"] > 0 and parent.data.metrics["summary/guard_actions"] == 2
    m = kids["companion"].data.metrics
    assert m["summary/guard_paused_s"] > 0 and m["summary/guard_pauses"] == 1
    # paused inside its active phase: its slowdown leaves those seconds out, the other figure keeps them
    assert m["summary/guard_active_paused_s"] > 0
    assert m["summary/slowdown_with_pauses_ratio"] > m["summary/slowdown_ratio"]
    # the part of the pauses inside the window both were active in (the victim's active phase ends first)
    assert 0 < m["summary/overlap_paused_s"] <= m["summary/guard_active_paused_s"] + 1e-6
    assert kids["companion"].data.tags["collocation.guard"].startswith("watched; ")
    assert " pause companion " in kids["companion"].data.tags["collocation.guard"]
    v = kids["victim"].data.metrics
    assert v["summary/guard_live_slowdown_max"] > 1.5 and v["summary/guard_paused_s"] == 0
    assert "summary/slowdown_with_pauses_ratio" not in v  # never paused: one slowdown


def test_a_bad_guard_bound_is_one_line_before_anything_runs(tracking_uri):
    with pytest.raises(UsageError, match="guard slowdown 0.5 is not a bound"):
        run_group(Group("naive", [Workload("a", job(1), device="cpu")], guard_slowdown=0.5))


def test_contention_that_starts_late_is_caught_over_the_window_the_group_measures(tmp_path):
    """The victim's last 10 s look fine on average, but since its companion began its active phase it
    has run at half its alone rate: the slowdown the group will measure over their overlap."""
    import json

    base = time.time() - 10
    victim, companion = tmp_path / "victim.jsonl", tmp_path / "companion.jsonl"
    # victim: 20 samples/s alone-like for 8 s, then 10 samples/s for 1.5 s (from when the companion starts)
    rows, n = [], 0.0
    for k in range(1, 81):
        n += 2.0
        rows.append({"pid": 1, "t": base + k * 0.1, "samples": n})
    for k in range(1, 16):
        n += 1.0
        rows.append({"pid": 1, "t": base + 8.0 + k * 0.1, "samples": n})
    victim.write_text("".join(json.dumps(r) + "\n" for r in rows))
    companion.write_text(json.dumps({"pid": 2, "t": base + 8.0, "samples": 1.0}) + "\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    done = []
    try:
        g = guard_mod.Guard([guard_mod.Member("victim", str(victim), 20.0, pids=lambda: [],
                                              running=lambda: not done),
                             member("companion", sleeper, str(companion), None)], 1.5, window_s=10.0)
        g.tick(time.time())
        assert g.overlap_since == pytest.approx(base + 8.0)
        assert g.state["victim"].live is None  # over its last 10 s: 175 samples in 9.5 s, within the bound
        assert [(e.action, e.name) for e in g.events] == [("over", "victim"), ("pause", "companion")]
        assert g.events[0].live_slowdown == pytest.approx(2.0)  # 1.5 s at 10/s against 20/s alone
        assert g.events[0].why == "slowdown since every job was active > 1.5"
        assert psutil.Process(sleeper.pid).status() == psutil.STATUS_STOPPED
        done.append(True)  # the victim's process ended
        g.tick(time.time())
        assert psutil.Process(sleeper.pid).status() != psutil.STATUS_STOPPED
        assert [e.action for e in g.events][-1] == "resume" and g.paused_s("companion") > 0
        assert g.events[-1].why == "victim's active phase ended"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_with_weights_the_heaviest_companion_is_paused_first_then_the_next(tmp_path):
    # a did far more alone than it can: beyond the bound with b paused, and with c paused too
    a, pa = spawn(tmp_path, "a", 400)
    b, pb = spawn(tmp_path, "b", 400)
    c, pc = spawn(tmp_path, "c", 400)
    members = [member("a", a, pa, 1e6), member("b", b, pb, None), member("c", c, pc, None)]
    for m, w in zip(members, (0.5, 0.9, 0.1)):
        m.weight = w
    with guarding(guard_mod.Guard(members, 1.5, window_s=1.0), (a, b, c)) as g:
        first = watch_states({"c": c}, lambda: len(g.events) >= 2 or a.poll() is not None)
        assert [(e.action, e.name) for e in g.events[:2]] == [("over", "a"), ("pause", "b")]
        assert psutil.STATUS_STOPPED not in first["c"]  # the light companion ran on beside a
        until_unhelped(g, a)
    actions = [(e.action, e.name) for e in g.events]
    assert actions == [("over", "a"), ("pause", "b"), ("pause", "c"), ("unhelped", "a"), ("resume", "b"),
                       ("resume", "c")], g.log_text()
    assert "pause c live " in g.log_text() and ": a is still at " in g.log_text()
    assert g.events[0].lost_s is not None and g.events[0].lost_s >= 0 and "s lost" in g.log_text()


def test_without_weights_every_companion_is_paused_at_once(tmp_path):
    # a packing trial's group carries no weights: at its first split every companion stops together
    a, pa = spawn(tmp_path, "a", 400)
    b, pb = spawn(tmp_path, "b", 400)
    c, pc = spawn(tmp_path, "c", 400)
    members = [member("a", a, pa, 1e6), member("b", b, pb, None), member("c", c, pc, None)]
    with guarding(guard_mod.Guard(members, 1.5, window_s=1.0), (a, b, c)) as g:
        until_unhelped(g, a)
    actions = [(e.action, e.name) for e in g.events]
    assert actions == [("over", "a"), ("pause", "b"), ("pause", "c"), ("unhelped", "a"), ("resume", "b"),
                       ("resume", "c")], g.log_text()
    over, pause_b, pause_c = g.events[:3]
    assert pause_b.t - over.t < g.tick_s and pause_c.t - over.t < g.tick_s  # in the same look, not a window apart
