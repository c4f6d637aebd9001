"""The guard beside a running group: real child processes pinned to one CPU slow each other down,
real SIGSTOP/SIGCONT of a process tree, progress files as workloads write them, a real SQLite store for
the group's runs. It judges a rate only after SETTLE_S of active phase, over its window, and before it
pauses it projects each job's lived slowdown for each way out and takes the cheapest."""
from __future__ import annotations

import contextlib
import json
import os
import re
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


def member(name, proc, path, rate, **alone):
    return guard_mod.Member(name, path, rate, pids=lambda: guard_mod.tree_pids(proc),
                            running=lambda: proc.poll() is None, **alone)


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
    # the watched job's alone rate is set far above what it can do: beyond any bound once its rate is
    # read, and still beyond with its companion stopped (what slows it is not its companion): the
    # companion runs again; without walls alone the guard cannot project a pause's cost: it pauses the others
    a, pa = spawn(tmp_path, "a", 600)
    b, pb = spawn(tmp_path, "b", 500)
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
    assert actions == [("over", "a"), ("pause", "b"), ("unhelped", "a"), ("resume", "b")], g.log_text()
    assert g.summary("b")["guard_paused_s"] > 0 and g.summary("b")["guard_pauses"] == 1
    assert g.summary("a")["guard_live_slowdown_max"] > 1.5 and "guard_live_slowdown_max" not in g.summary("b")
    assert "over a live" in g.log_text() and "resume b: pausing did not help a (live " in g.log_text()
    # its first rate was read once its active phase had run SETTLE_S and then a whole window
    marks = guard_mod.read_marks(pa)
    assert g.events[0].t - marks.progress_times()[0] >= guard_mod.SETTLE_S + 1.0 - 0.05


def test_jobs_within_the_bound_are_left_alone(tmp_path):
    a, pa = spawn(tmp_path, "a", 350)
    b, pb = spawn(tmp_path, "b", 350)
    g = guard_mod.Guard([member("a", a, pa, 1e-3), member("b", b, pb, 1e-3)], 1.5, window_s=1.0).start()
    states = watch_states({"a": a, "b": b}, lambda: a.poll() is not None and b.poll() is not None)
    g.stop()
    assert psutil.STATUS_STOPPED not in states["a"] | states["b"]
    assert g.events == [] and g.log_text() == "no action"
    assert g.summary("a")["guard_live_slowdown_max"] < 1.0  # it was read, and far within the bound
    assert g.member_text("a") == "watched, no action (max slowdown 1.5)"


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


# -- the rate it reads, and what it does with it: progress files written as a workload writes them --------

def write_progress(path, start: float, end: float, rate: float, step: float = 0.1) -> float:
    """Records of a workload doing `rate` samples/s from `start` to `end` (s since the epoch), one each
    `step` s; returns its total."""
    rows, n, t = [], 0.0, start
    while t <= end + 1e-9:
        rows.append({"pid": 1, "t": t, "samples": n})
        n += rate * step
        t += step
    with open(path, "w") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    return rows[-1]["samples"]


@contextlib.contextmanager
def sleepers(n: int):
    """n real processes for the guard to stop and continue."""
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
             for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def projections(why: str) -> dict[str, float]:
    """The worst projected slowdown of each way out, as an event's text names them."""
    return {w: float(x) for w, x in re.findall(r"(pause the others|pause \w+|run on): ([0-9.]+)", why)}


def status(proc) -> str:
    return psutil.Process(proc.pid).status()


def stopped(proc, timeout: float = 5.0) -> bool:
    """Whether the process is stopped, once a signal sent to it has taken effect (a busy host may not
    run it at once)."""
    deadline = time.time() + timeout
    while status(proc) != psutil.STATUS_STOPPED and time.time() < deadline:
        time.sleep(0.02)
    return status(proc) == psutil.STATUS_STOPPED


def running(proc, timeout: float = 5.0) -> bool:
    """Whether the process runs (is not stopped), once a SIGCONT sent to it has taken effect."""
    deadline = time.time() + timeout
    while status(proc) == psutil.STATUS_STOPPED and time.time() < deadline:
        time.sleep(0.02)
    return status(proc) != psutil.STATUS_STOPPED


def test_a_rate_is_judged_only_after_the_active_phase_settled_and_over_a_whole_window(tmp_path):
    now = time.time()
    path = tmp_path / "a.jsonl"
    with sleepers(2) as (a, b):
        def guard(active_s):
            return guard_mod.Guard([member("a", a, str(path), 10.0, alone_active_s=active_s),
                                    member("b", b, None, None)], 1.5)

        # 2.9 s of progress at half its rate alone: SETTLE_S + WINDOW_S not reached, nothing read yet
        write_progress(path, now - guard_mod.SETTLE_S - guard_mod.WINDOW_S + 0.1, now, 5.0)
        g = guard(60.0)
        g.tick(now)
        assert g.state["a"].live is None and g.events == []
        write_progress(path, now - guard_mod.SETTLE_S - guard_mod.WINDOW_S - 0.1, now, 5.0)
        g = guard(60.0)
        g.tick(now)
        assert g.state["a"].live == pytest.approx(2.0)  # over the last WINDOW_S: half its rate alone
        assert [(e.action, e.name) for e in g.events] == [("over", "a"), ("pause", "b")]
        assert stopped(b)
        g.stop()
        assert running(b) and g.events[-1].why == "the group ends"
        # a job whose active phase alone is shorter than a steady window is never judged by its rate
        g = guard(guard_mod.SETTLE_S + guard_mod.WINDOW_S - 0.5)
        g.tick(now)
        assert not g.watched("a") and g.state["a"].live is None and g.events == []


def test_the_over_job_is_paused_where_pausing_its_companion_would_push_the_companion_past_the_bound(tmp_path):
    now = time.time()
    over, companion = tmp_path / "over.jsonl", tmp_path / "companion.jsonl"
    # over: 100 s alone (80 s active at 10 samples/s); started 10 s ago, active for 8 s at 5/s: live 2.0,
    # 40 samples done, 76 s of its active phase still to go
    write_progress(over, now - 8.0, now, 5.0)
    # companion: 20 s alone (15 s active at 10/s); started 22 s ago, active for 16 s at 10/1.4 per s:
    # live 1.4 (within the bound), 114.3 samples done, 3.6 s to go
    write_progress(companion, now - 16.0, now, 10.0 / 1.4)
    with sleepers(2) as (o, c):
        g = guard_mod.Guard([
            member("over", o, str(over), 10.0, alone_wall_s=100.0, alone_active_s=80.0, started=lambda: now - 10.0),
            member("companion", c, str(companion), 10.0, alone_wall_s=20.0, alone_active_s=15.0,
                   started=lambda: now - 22.0)], 1.5)
        g.tick(now)
        assert g.events[0].live_slowdown == pytest.approx(2.0) and g.state["companion"].live == pytest.approx(1.4)
        assert g.remaining_s("over") == pytest.approx(76.0) and g.remaining_s("companion") == pytest.approx(
            15.0 - 16.0 / 1.4, abs=0.01)
        rest = g.remaining_s("companion")
        assert [(e.action, e.name) for e in g.events] == [("over", "over"), ("pause", "over")], g.log_text()
        assert g.events[0].why.startswith("over is at 2.00 > 1.5; projected worst slowdown ")
        ways = projections(g.events[0].why)
        assert list(ways) == ["pause the others", "pause over", "run on"]
        # pausing the companion adds the over job's 76 s to its 22 + 3.6 s: at least 5.08 x its 20 s alone
        assert ways["pause the others"] >= round((22.0 + 76.0 + rest) / 20.0, 2) > 1.5
        assert ways["pause the others"] == round(g.projected("companion", now, 76.0), 2)
        # pausing the over job adds the companion's 3.6 s to it (1.05 as a job that stops on time would
        # pay it): the companion, running on alone, ends at (22 + 3.6) / 20 = 1.28, the worst of the two
        assert ways["pause over"] == round((22.0 + rest) / 20.0, 2) <= 1.5
        assert g.projected("over", now, rest) < ways["pause over"]
        # both running on: the companion's 3.6 s at 1.4 costs it 1.4 s more, 1.35
        assert ways["run on"] == round((22.0 + rest * 1.4 * (1 - 1 / 1.4) + rest) / 20.0, 2) > ways["pause over"]
        assert stopped(o) and status(c) != psutil.STATUS_STOPPED
        assert g.protecting == "companion"
        c.kill()  # the companion's active phase ends with it: the over job runs again
        c.wait()
        g.tick(time.time())
        assert running(o)
        assert [(e.action, e.name) for e in g.events][-1] == ("resume", "over")
        assert g.events[-1].why == "companion's active phase ended" and g.paused_s("over") > 0


def test_both_run_on_where_either_pause_would_cost_more_than_sharing(tmp_path):
    now = time.time()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    # both 100 s alone (80 s active at 10/s), started 10 s ago, active for 8 s: a at live 1.6 (75 s to
    # go), b at 1.1 (72.7 s to go). Either pause adds the other's remaining active phase to the paused
    # job: at least (10 + 75 + 72.7) / 100 = 1.58; running on costs a 80 s x (1 - 1/1.6) = 30 s, at worst
    # (a job that stops on time) 80 / (80 - 30) = 1.6 of its work
    write_progress(a, now - 8.0, now, 10.0 / 1.6)
    write_progress(b, now - 8.0, now, 10.0 / 1.1)
    with sleepers(2) as (pa, pb):
        g = guard_mod.Guard([member(n, p, str(f), 10.0, alone_wall_s=100.0, alone_active_s=80.0,
                                    started=lambda: now - 10.0) for n, p, f in (("a", pa, a), ("b", pb, b))], 1.5)
        g.tick(now)
        assert [(e.action, e.name) for e in g.events] == [("kept", "a")], g.log_text()
        ways = projections(g.events[0].why)
        assert ways["pause the others"] >= 1.58 and ways["pause a"] >= 1.58
        assert ways["run on"] == round(max(g.projected("a", now, 30.0), g.projected("b", now, 80.0 * (1 - 1 / 1.1))), 2)
        assert ways["run on"] < min(ways["pause the others"], ways["pause a"])
        assert status(pa) != psutil.STATUS_STOPPED and status(pb) != psutil.STATUS_STOPPED
        assert g.member_text("a").startswith("watched; ") and " kept a live 1.60: a is at 1.60 > 1.5" in g.log_text()
        # still beyond the bound half a second on: not weighed again within a window; a window on, it is
        for t in (0.5, 2.5):
            write_progress(a, now - 8.0, now + t, 10.0 / 1.6)
            write_progress(b, now - 8.0, now + t, 10.0 / 1.1)
            g.tick(now + t)
            assert g.state["a"].live == pytest.approx(1.6)
        assert [(e.action, e.name) for e in g.events] == [("kept", "a"), ("kept", "a")], g.log_text()
        assert g.events[1].t == now + 2.5 and g.paused_s("a") == g.paused_s("b") == 0


def runs(uri):
    client = MlflowClient(uri)
    found = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return ([r for r in found if "mlflow.parentRunId" not in r.data.tags],
            {r.data.tags.get("collocation.workload"): r for r in found if "mlflow.parentRunId" in r.data.tags})


def baseline(uri: str, rate: float | None, wall: float) -> tuple[str, float]:
    """An exclusive run of a workload whose 4 s active phase did `rate` samples/s (the figure the guard
    compares with; None: it reported no progress) in `wall` s, as a group's baseline."""
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("guard") or client.get_experiment(client.create_experiment("guard"))
    run_id = client.create_run(exp.experiment_id, tags={"collocation.mode": "exclusive"}).info.run_id
    for key, value in (("active_s", 4.0), ("throughput_samples_per_s", rate), ("e2e_duration_s", wall)):
        if value is not None:
            client.log_metric(run_id, f"summary/{key}", value)
    client.set_terminated(run_id, "FINISHED")
    return run_id, wall


def test_a_guarded_group_counts_the_pauses_in_the_lived_slowdown_and_says_what_it_did(tracking_uri, tmp_path):
    # "victim" did far more alone than it can here: beyond the bound from its first steady window on. The
    # companion (not watched: no rate alone) took 100 s alone: a pause costs it little, and pausing the
    # victim would save the victim nothing, so the companion is paused
    baselines = {"victim": baseline(tracking_uri, 1e6, 5.0), "companion": baseline(tracking_uri, None, 100.0)}
    workloads = [Workload("victim", job(900), device="cpu"), Workload("companion", job(500), device="cpu")]
    lines = []
    result = run_group(Group("naive", workloads, experiment_name="guard", interval=0.2, baselines=baselines,
                             guard_slowdown=1.5), echo=lines.append)
    assert result.status == "FINISHED" and all(c.status == "FINISHED" for c in result.children)
    parents, kids = runs(tracking_uri)
    parent = next(p for p in parents if p.info.run_id == result.parent_run_id)
    text = parent.data.tags["collocation.guard"]
    assert text.startswith("max slowdown 1.5: ") and " over victim live " in text
    assert "; projected worst slowdown pause the others: " in text
    assert " pause companion " in text and " resume companion: pausing did not help victim" in text
    assert any(line.startswith("radt-ext guard: victim live slowdown") for line in lines)
    assert parent.data.metrics["summary/guard_paused_s"] > 0 and parent.data.metrics["summary/guard_actions"] == 2
    m = kids["companion"].data.metrics
    assert m["summary/guard_paused_s"] > 0 and m["summary/guard_pauses"] == 1
    assert 0 < m["summary/guard_active_paused_s"] <= m["summary/guard_paused_s"] + 1e-6
    # the slowdown as it lived it: its wall time here, pauses included, over its wall time alone
    assert m["summary/e2e_duration_s"] > m["summary/guard_paused_s"]
    assert m["summary/slowdown_ratio"] == pytest.approx(m["summary/e2e_duration_s"] / 100.0, rel=1e-3)
    assert kids["companion"].data.tags["collocation.slowdown_basis"] == "wall"
    assert "summary/slowdown_with_pauses_ratio" not in m
    # beside it the active-phase figure: its active phase here, paused seconds left out, over its 4 s alone
    assert m["summary/active_slowdown_ratio"] == pytest.approx(
        (m["summary/active_s"] - m["summary/guard_active_paused_s"]) / 4.0, rel=1e-3)
    assert kids["companion"].data.tags["collocation.guard"].startswith("not watched")
    assert " pause companion " in kids["companion"].data.tags["collocation.guard"]
    v = kids["victim"].data.metrics
    assert v["summary/guard_live_slowdown_max"] > 1.5 and v["summary/guard_paused_s"] == 0


def test_a_measurement_group_stops_its_workloads_once_measured_side_by_side(tracking_uri):
    """measure_s: once both active phases ran that long side by side, both are stopped (SIGINT, as Ctrl-C):
    their runs end FINISHED, tagged with the window, and the pair is measured on the parent as any shared
    group's; no bound asked, so the guard only follows them."""
    baselines = {"a": baseline(tracking_uri, 2000.0, 60.0), "b": baseline(tracking_uri, 2000.0, 60.0)}
    workloads = [Workload("a", job(100000), device="cpu"), Workload("b", job(100000), device="cpu")]
    lines = []
    t0 = time.time()
    result = run_group(Group("naive", workloads, experiment_name="guard", interval=0.2, baselines=baselines,
                             measure_s=3.5), echo=lines.append)
    took = time.time() - t0
    assert result.status == "FINISHED" and result.exit_code == 0, lines
    assert [c.status for c in result.children] == ["FINISHED", "FINISHED"]
    assert took < 60, "stopped once measured, not at their 100000 steps"
    assert any("3.5 s side by side measured: stopping a, b" in line for line in lines)
    parents, kids = runs(tracking_uri)
    parent = next(p for p in parents if p.info.run_id == result.parent_run_id)
    assert parent.data.tags["collocation.measured_s"] == "3.5" and "collocation.guard" not in parent.data.tags
    pair, = json.loads(parent.data.tags["collocation.pairs"])
    assert (pair["a"], pair["b"]) == ("a", "b") and pair["span_s"] >= 2.0 and all(x > 0 for x in pair["slowdowns"])
    for name in ("a", "b"):
        assert kids[name].info.status == "FINISHED" and kids[name].data.tags["collocation.measured_s"] == "3.5"
        assert kids[name].data.metrics["summary/active_s"] >= 3.5


def test_a_measurement_alone_counts_its_window_from_its_first_step_not_its_start_up(tracking_uri):
    """One workload alone with measure_s: its start-up (2 s before its first step) is not part of the window:
    it is stopped measure_s after its active phase began, and its run holds that active phase."""
    w = Workload("a", [*job(100000), "--start-s", "2"], device="cpu")
    result = run_group(Group("exclusive", [w], experiment_name="guard", interval=0.2, measure_s=3.0))
    assert result.status == "FINISHED" and result.children[0].status == "FINISHED"
    _, kids = runs(tracking_uri)
    m = kids["a"].data.metrics
    assert kids["a"].data.tags["collocation.measured_s"] == "3"
    assert m["summary/active_s"] >= 3.0 and m["summary/e2e_duration_s"] >= 5.0


def test_a_bad_guard_bound_is_one_line_before_anything_runs(tracking_uri):
    with pytest.raises(UsageError, match="guard slowdown 0.5 is not a bound"):
        run_group(Group("naive", [Workload("a", job(1), device="cpu")], guard_slowdown=0.5))


def test_pausing_the_others_stops_every_companion_at_once(tmp_path):
    # a did far more alone than it can, and nothing says what a pause would cost: every companion
    # stops together, in the same look, and each runs again when pausing did not help a
    a, pa = spawn(tmp_path, "a", 600)
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
    assert over.lost_s is not None and over.lost_s >= 0 and "s lost" in g.log_text()


def _timed_and_next(now, tmp_path, next_rate):
    """A job that stops on time, `timed` (14 s alone, 10 s active at 10 samples/s), started 8 s ago and
    4 s into its active phase at 5/s (live 2.0, 8 s of work to go), and the next job of its chain, `next`
    (25 s alone, a 1 s active phase), started 3 s ago and still starting up (no progress yet)."""
    timed = tmp_path / "timed.jsonl"
    write_progress(timed, now - 4.0, now, 5.0)
    return timed, dict(alone_wall_s=25.0, alone_active_s=1.0, started=lambda: now - 3.0), next_rate


@pytest.mark.parametrize("next_rate", [10.0, None], ids=["starting-up", "no-rate-alone"])
def test_a_neighbour_starting_up_or_without_a_rate_is_paused_at_the_cost_of_its_pause_alone(tmp_path, next_rate):
    # the neighbour's start-up slows the job that stops on time beside it: pausing the neighbour adds the
    # timed job's 8 s left to the neighbour's 25 s alone, (25 + 8) / 25; never its 1 s active phase
    # over what a pause would leave of it (a division by a rate it does not have: 1000x and more)
    now = time.time()
    timed, alone, rate = _timed_and_next(now, tmp_path, next_rate)
    with sleepers(2) as (t, n):
        g = guard_mod.Guard([
            member("timed", t, str(timed), 10.0, alone_wall_s=14.0, alone_active_s=10.0, started=lambda: now - 8.0),
            member("next", n, None, rate, **alone)], 1.5)
        g.tick(now)
        assert [(e.action, e.name) for e in g.events] == [("over", "timed"), ("pause", "next")], g.log_text()
        assert g.remaining_s("timed") == pytest.approx(8.0)
        assert g.projected("next", now, 8.0) == pytest.approx((25.0 + 8.0) / 25.0)
        ways = projections(g.events[0].why)
        assert ways["pause the others"] == round((25.0 + 8.0) / 25.0, 2)
        # pausing the timed job instead would cost it the neighbour's 22 s left: beyond the bound
        assert ways["pause timed"] > 1.5 and ways["run on"] > 1.5
        assert stopped(n) and status(t) != psutil.STATUS_STOPPED and g.protecting == "timed"
        t.kill()  # the timed job's active phase ends with it: its neighbour runs on
        t.wait()
        g.tick(time.time())
        assert running(n) and g.events[-1].why == "timed's active phase ended"


def test_a_pause_costs_a_job_that_stops_on_time_only_what_is_left_of_its_active_phase(tmp_path):
    now = time.time()
    path = tmp_path / "a.jsonl"
    write_progress(path, now - 4.0, now, 10.0)  # 4 s into its 10 s active phase, at its rate alone
    with sleepers(1) as (a,):
        g = guard_mod.Guard([member("a", a, str(path), 10.0, alone_wall_s=14.0, alone_active_s=10.0,
                                    started=lambda: now - 8.0)], 1.5)
        g.tick(now)
        # 3 s taken from its 6 s left: 10 / 7 of its work lost at worst; 30 s: all 6 s left, never more
        assert g.projected("a", now, 3.0) == pytest.approx(max((8.0 + 3.0 + 6.0) / 14.0, 10.0 / 7.0), rel=1e-3)
        assert g.projected("a", now, 30.0) == pytest.approx(max((8.0 + 30.0 + 6.0) / 14.0, 10.0 / 4.0), rel=1e-3)
        assert g.projected("a", now, 0.0) == pytest.approx((8.0 + 6.0) / 14.0, rel=1e-3)


def test_until_left_returns_once_the_job_has_that_much_of_its_active_phase_to_go(tmp_path):
    a, pa = spawn(tmp_path, "a", 400)
    started = time.time()
    # 400 steps at 20 steps/s alone: a 20 s active phase; 10 s of it left once 200 steps are done
    m = member("a", a, pa, 20.0, alone_active_s=20.0, alone_wall_s=21.0, started=lambda: started)
    with guarding(guard_mod.Guard([m], 1.5), [a]) as g:
        assert g.until_left("a", 10.0) == "left"
        done = guard_mod.read_marks(pa).total_at("samples", time.time())
        running = a.poll() is None
        assert g.until_left("a", 10.0, stopped=lambda: True) == "stopped"
    assert 200 <= done < 400 and running
    assert g.until_left("a", 10.0) == "ended"  # its process has ended: nothing to wait for


def test_until_left_does_not_wait_for_a_job_it_cannot_follow(tmp_path):
    a, pa = spawn(tmp_path, "a", 50)
    started = time.time()
    no_rate = member("a", a, pa, None, alone_active_s=20.0, alone_wall_s=21.0, started=lambda: started)
    with guarding(guard_mod.Guard([no_rate], 1.5), [a]) as g:
        assert g.until_left("a", 0.0) == "unfollowed"
    silent = guard_mod.Member("s", str(tmp_path / "none.jsonl"), 20.0, pids=lambda: [], running=lambda: True,
                              alone_active_s=1.0, alone_wall_s=0.5, started=lambda: started - 1.0)
    # running, and no progress by the end of its wall time alone
    assert guard_mod.Guard([silent], 1.5).until_left("s", 0.0) == "unfollowed"
