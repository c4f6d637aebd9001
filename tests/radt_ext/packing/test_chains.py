"""A GPU's jobs as a chain (packing/chains.py): the play of phases forward (start-ups beside active
phases, active phases side by side, the guard's split), each job's budget under the bound, and how a job
follows the one before it, on profiles read back from a real SQLite store (store.py) and pairs measured
side by side as a group run tags them (store.log_pair)."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.collocation import guard
from radt_ext.packing import chains, model, profiles
from radt_ext.packing.chains import Phases
from radt_ext.packing.planner import Job
from tests.radt_ext.packing.store import log_pair, log_profile

EXP = "queue"
BOUND = 1.5
LIMIT = chains.PLAN_SHARE * BOUND  # what every job is planned within


def beside(x: float):
    """Every active phase slowed x times by any other active phase beside it."""
    return lambda k, other: x


# -- the play ------------------------------------------------------------------------------------------

def test_a_later_jobs_startup_beside_the_earlier_ones_active_phase_costs_neither_anything():
    # the later job starts so that its 5 s start-up ends as the earlier one's active phase [2, 12] ends
    ph = [Phases(2.0, 10.0, 1.0), Phases(5.0, 10.0, 1.0)]
    played = chains.simulate(ph, [0.0, 7.0], beside(2.0))
    assert played.active_from == [2.0, 12.0] and played.active_to == [12.0, 22.0]
    assert played.ends == [13.0, 23.0] and played.paused_s == [0.0, 0.0]
    walls = [e - s for s, e in zip(played.starts, played.ends)]
    assert walls == [ph[0].wall, ph[1].wall]  # each as long as alone, though a slowdown of 2 was at hand
    # started 2 s sooner, their active phases meet for 2 s at 2x: each one's wall grows
    sooner = chains.simulate(ph, [0.0, 5.0], beside(2.0))
    assert sooner.ends[0] > 13.0 and sooner.ends[1] - 5.0 > ph[1].wall


def test_two_active_phases_side_by_side_stretch_both():
    played = chains.simulate([Phases(0.0, 10.0, 0.0), Phases(0.0, 10.0, 0.0)], [0.0, 0.0], beside(2.0))
    assert played.ends == [20.0, 20.0]  # each at half its rate throughout
    # a shorter one ends first; the longer one does the rest of its work alone: 4 s of work at half rate
    # takes 8 s, in which the other did 4 of its 10, and its last 6 alone
    played = chains.simulate([Phases(0.0, 4.0, 0.0), Phases(0.0, 10.0, 0.0)], [0.0, 0.0], beside(2.0))
    assert played.active_to == [8.0, 14.0]
    # each job's own slowdown beside the other: the first at 1.5, the second at 3
    pair = chains.simulate([Phases(0.0, 6.0, 0.0), Phases(0.0, 6.0, 0.0)], [0.0, 0.0],
                           lambda k, other: 1.5 if k == 0 else 3.0)
    assert pair.active_to[0] == pytest.approx(9.0)  # 6 s of work at 1/1.5
    assert pair.active_to[1] == pytest.approx(9.0 + (6.0 - 9.0 / 3.0))  # 3 done beside, 3 left alone


def test_a_split_pauses_the_later_job_after_the_steady_window_until_the_earlier_ones_active_phase_ends():
    assert chains.STEADY_S == guard.SETTLE_S + guard.WINDOW_S
    ph = [Phases(1.0, 10.0, 1.0), Phases(2.0, 10.0, 1.0)]
    played = chains.simulate(ph, [0.0, 3.0], beside(2.0), splits={1: 0})
    # the later job's active phase begins at 5, beside the earlier one's (from 1: 4 s done alone); after
    # STEADY_S (3 s at half rate: 1.5 s of work each) it is paused until the earlier one's 4.5 s left end
    s = chains.STEADY_S
    assert played.active_from == [1.0, 5.0]
    assert played.active_to[0] == pytest.approx(5.0 + s + (10.0 - 4.0 - s / 2))
    assert played.paused_s == [0.0, pytest.approx(10.0 - 4.0 - s / 2)]
    assert played.active_to[1] == pytest.approx(played.active_to[0] + 10.0 - s / 2)  # then the rest alone
    assert played.ends[1] == pytest.approx(played.active_to[1] + 1.0)
    # without the split both would have gone on at half rate
    whole = chains.simulate(ph, [0.0, 3.0], beside(2.0))
    assert whole.paused_s == [0.0, 0.0] and whole.active_to[0] > played.active_to[0]


# -- budgets -------------------------------------------------------------------------------------------

def test_a_jobs_budget_is_what_the_bound_leaves_its_active_phase():
    b = chains.PLAN_SHARE * BOUND
    for ph in (Phases(5.0, 60.0, 1.0), Phases(40.0, 10.0, 0.0), Phases(0.0, 10.0, 0.0)):
        want = min((b - 1) * ph.wall, (1 - 1 / b) * ph.active)
        assert chains.budget_s(ph, BOUND) == pytest.approx(want)
    assert chains.budget_s(Phases(5.0, 60.0, 1.0), BOUND) == pytest.approx((1 - 1 / b) * 60.0)  # ~17 s
    # a job that spends its wall in start-up has as little to give as its short active phase
    assert chains.budget_s(Phases(40.0, 10.0, 0.0), BOUND) < 3.0
    assert chains.budget_s(Phases(5.0, 60.0, 1.0), 1.05) == 0.0  # 0.93 x 1.05 < 1: nothing to spend


# -- links ---------------------------------------------------------------------------------------------

def job(uri: str, key: str, startup: float, active: float, tail: float = 1.0, util: float = 50.0,
        throughput: float | None = 1000.0) -> None:
    """An exclusive profile: `startup` s of start-up, `active` s of active phase, `tail` s of wind-down;
    the GPU busy `util` % of its active phase (naive: the model slows the other job by as much)."""
    log_profile(uri, EXP, key, (40.0, 10.0, util, 2000.0, 250.0, active),
                whole=(20.0, 5.0, util / 2, 2000.0, 150.0, startup + active + tail), startup_s=startup,
                throughput=throughput)


def jobs(uri: str, model_name: str | None = None) -> tuple[profiles.Knowledge, dict[str, Job]]:
    k = profiles.read(MlflowClient(uri), EXP, model_name)
    return k, {key: Job(key, key, profile=p) for key, p in k.profiles.items()}


def planner(k, mode: str = "naive", trials: bool = True) -> chains.ChainPlanner:
    return chains.ChainPlanner(k, mode, BOUND, trials, None)


def test_a_trial_only_where_both_budgets_cover_the_guards_steady_window(tracking_uri):
    job(tracking_uri, "short", 5.0, 10.0)  # budget 2.8 s: half of it under STEADY_S
    job(tracking_uri, "mid", 5.0, 30.0)  # 8.5 s
    job(tracking_uri, "long", 5.0, 60.0)  # 17 s
    job(tracking_uri, "silent", 5.0, 60.0, throughput=None)  # reports no progress: the guard cannot read it
    k, j = jobs(tracking_uri)
    cp = planner(k)
    ph = {n: chains.phases(p.profile) for n, p in j.items()}
    assert ph["mid"] == Phases(5.0, 30.0, 1.0)
    for a, b in (("short", "short"), ("short", "long"), ("long", "short"), ("mid", "mid"),
                 ("mid", "silent"), ("silent", "long")):
        link = cp.link(j[a], j[b])
        assert link.basis == "start-up" and link.overlap_s == 0.0, (a, b, link)
    assert cp.link(j["short"], j["long"]).text().startswith("its start-up beside the job before")
    trial = cp.link(j["mid"], j["long"])  # a long job follows: the later one's half budget pays for the trial
    half = chains.budget_s(ph["long"], BOUND) / 2
    assert trial.basis == "trial"
    assert trial.overlap_s == pytest.approx(min(ph["mid"].active - chains.STEADY_S, half - chains.STEADY_S))
    assert trial.overlap_s >= chains.MIN_TRIAL_S
    assert trial.slowdowns == pytest.approx(model.slowdowns([j["mid"].profile, j["long"].profile], "naive"))
    assert trial.text().startswith(f"trial, {trial.overlap_s:.1f} s side by side under the guard (model ")
    assert planner(k, trials=False).link(j["mid"], j["long"]).basis == "start-up"  # pack.trials: false
    # the chain starts the long job so that its active phase begins that much before the mid one's ends
    c = cp.chain([j["mid"], j["long"]])
    # (its start-up beside the mid one slows that one by trial.boot: the mid one's active phase is that much longer)
    x = trial.boot
    assert x == model.BOOT and trial.boot_s is None
    assert c.starts[1] == pytest.approx(ph["mid"].startup + ph["mid"].active - trial.overlap_s - ph["long"].startup / x)
    assert max(c.slowdowns) <= LIMIT
    start_up = planner(k, trials=False).chain([j["mid"], j["long"]])
    # start-up beside active phase: the earlier job pays its neighbour's start-up at x, the later nothing
    assert start_up.slowdowns == pytest.approx([1.0 + ph["long"].startup * (1 - 1 / x) / ph["mid"].wall, 1.0])
    assert c.makespan_s < start_up.makespan_s


def test_a_trial_the_model_puts_beyond_the_bound_is_planned_split_and_still_within_the_bound(tracking_uri):
    job(tracking_uri, "a", 5.0, 40.0, util=90.0)
    job(tracking_uri, "b", 5.0, 60.0, util=90.0)
    k, j = jobs(tracking_uri)
    link = planner(k).link(j["a"], j["b"])
    assert link.basis == "trial" and link.split and max(link.slowdowns) > BOUND
    c = planner(k).chain([j["a"], j["b"]])
    assert max(c.slowdowns) <= LIMIT  # what a split costs (STEADY_S side by side, then a pause) fits the budgets
    # the play of that chain: b paused once it has been active beside a for STEADY_S, until a's active phase ends
    ph = [chains.phases(j[n].profile) for n in "ab"]
    played = chains.simulate(ph, c.starts, lambda k_, o: link.slowdowns[0] if k_ == 0 else link.slowdowns[1], {1: 0},
                             boot=lambda k_, o: link.boot if (k_, o) == (0, 1) else 1.0)
    assert played.paused_s[1] > 0 and played.active_to[1] > played.active_to[0]
    assert [e - s for s, e in zip(played.starts, played.ends)] == pytest.approx(c.walls)


def test_a_measured_pair_overlaps_as_far_as_each_jobs_budget_pays_for_it(tracking_uri):
    job(tracking_uri, "a", 5.0, 30.0)
    job(tracking_uri, "b", 5.0, 30.0)
    unmeasured, _ = jobs(tracking_uri)
    run = log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.2), ("b-1", "b", 1.25)])
    k, j = jobs(tracking_uri)
    link = planner(k).link(j["a"], j["b"])
    whole = chains.budget_s(Phases(5.0, 30.0, 1.0), BOUND)
    boot = 5.0 * (1 - 1 / link.boot)  # what b's start-up beside costs a
    # r costs a r (x_a - 1) of wall time and b r x_a (1 - 1/x_b): the largest r within both budgets (a measured
    # pair within the bound may spend all of each): here the whole active phase
    assert link.basis == "measured" and link.slowdowns == (1.2, 1.25) and link.evidence == run
    assert link.overlap_s == pytest.approx(min(30.0, (whole - boot) / 0.2, whole / (1.2 * (1 - 1 / 1.25)))) == 30.0
    assert link.text().startswith(f"measured (run {run[:8]}: 1.20/1.25), {link.overlap_s:.1f} s side by side; ")
    assert planner(k).link(j["b"], j["a"]).slowdowns == (1.25, 1.2)  # the same pair the other way round
    c = planner(k).chain([j["a"], j["b"]])
    assert max(c.slowdowns) <= LIMIT
    # side by side for their whole length: b starts with a, its start-up beside a's first seconds
    assert c.starts[1] == pytest.approx(0.0)
    played = chains.ChainPlanner.play([chains.phases(j[n].profile) for n in "ab"], c.starts, c.links)
    assert played.active_from[1] - played.active_from[0] < 1.0 and played.active_to[1] > played.active_to[0]
    # nothing measured (and no trial: the budgets are short): b's active phase only after a's
    before = planner(unmeasured).chain([Job("a", "a", profile=unmeasured.profiles["a"]),
                                        Job("b", "b", profile=unmeasured.profiles["b"])])
    assert before.links[1].basis == "start-up" and before.slowdowns[1] == pytest.approx(1.0)
    assert c.makespan_s < before.makespan_s - 10
    # in mps nothing was measured
    assert planner(k, "mps").link(j["a"], j["b"]).basis == "start-up"


def test_a_pair_measured_beyond_the_bound_is_not_repeated(tracking_uri):
    job(tracking_uri, "a", 5.0, 60.0)
    job(tracking_uri, "b", 5.0, 60.0)
    run = log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.2), ("b-1", "b", 1.9)])
    k, j = jobs(tracking_uri)
    link = planner(k).link(j["a"], j["b"])  # long enough for a trial, but the store says b left the bound
    assert link.basis == "start-up" and link.overlap_s == 0.0
    assert link.slowdowns == (1.2, 1.9) and link.evidence == run
    assert "measured beyond the bound side by side" in link.text()
    c = planner(k).chain([j["a"], j["b"]])
    ph = [chains.phases(j[n].profile) for n in "ab"]
    played = chains.ChainPlanner.play(ph, c.starts, c.links)
    assert played.active_from[1] >= played.active_to[0] - 1e-6  # their active phases never meet
    # a newer measurement within the bound: side by side again
    log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.2), ("b-1", "b", 1.3)])
    k, j = jobs(tracking_uri)
    assert planner(k).link(j["a"], j["b"]).basis == "measured"


def test_a_measured_pair_that_does_no_more_side_by_side_than_one_after_the_other_gets_start_up_only(tracking_uri):
    job(tracking_uri, "a", 5.0, 60.0)
    job(tracking_uri, "b", 5.0, 60.0)
    run = log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.98), ("b-1", "b", 2.0)])  # 1 + 0.99 - 1.98 <= 0.05
    k, j = jobs(tracking_uri)
    loose = chains.ChainPlanner(k, "naive", 3.0, True, None)  # a bound both are within
    link = loose.link(j["a"], j["b"])  # long enough for a trial, but the store says it does not pay
    assert link.basis == "start-up" and link.overlap_s == 0.0
    assert link.slowdowns == (1.98, 2.0) and link.evidence == run
    # a pair just on the paying side of that line is overlapped
    log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.9), ("b-1", "b", 1.9)])  # newer: 1 + 1 - 1.9 = 0.1
    k, j = jobs(tracking_uri)
    link = chains.ChainPlanner(k, "naive", 3.0, True, None).link(j["a"], j["b"])
    assert link.basis == "measured" and link.overlap_s > 0


def test_every_job_of_a_long_chain_is_planned_within_its_share_of_the_bound(tracking_uri):
    for n, (startup, active) in enumerate(((5.0, 30.0), (5.0, 60.0), (5.0, 45.0), (30.0, 10.0), (5.0, 60.0))):
        job(tracking_uri, f"j{n}", startup, active)
    log_pair(tracking_uri, EXP, "naive", [("x", "j1", 1.1), ("y", "j2", 1.3)])
    k, j = jobs(tracking_uri)
    order = [j[f"j{n}"] for n in range(5)]
    c = planner(k).chain(order)
    assert [link.basis if link else None for link in c.links][:3] == [None, "trial", "measured"]
    assert all(x <= LIMIT + 1e-6 for x in c.slowdowns), c.slowdowns
    ph = [chains.phases(x.profile) for x in order]
    played = chains.simulate(ph, c.starts, chains.ChainPlanner._pairs(c.links), chains.ChainPlanner._splits(c.links))
    # never three active phases at once: each job's active phase begins after the one two before it ended
    for n in range(2, 5):
        assert played.active_from[n] >= played.active_to[n - 2] - 1e-6
    assert c.makespan_s < sum(p.wall for p in ph)


def test_a_chains_next_job_waits_for_the_work_planned_before_it_where_the_job_before_runs_late():
    # planned: the first job's 10 s active phase from 1 s; the second started at 8 s with 3 s of it to go
    planned = chains.simulate([Phases(1.0, 10.0, 1.0), Phases(2.0, 5.0, 1.0)], [0.0, 8.0], beside(1.0), chain=True)
    assert planned.left_before == [None, pytest.approx(3.0)]
    # as it runs: the first job's active phase takes 16 s; by its offset alone the second meets it 9 s early
    late = [Phases(1.0, 16.0, 1.0), Phases(2.0, 5.0, 1.0)]
    by_offset = chains.simulate(late, [0.0, 8.0], beside(1.0), chain=True)
    by_work = chains.simulate(late, [0.0, 8.0], beside(1.0), chain=True, work_left=planned.left_before)
    assert by_offset.starts[1] == pytest.approx(8.0)
    assert by_work.starts[1] == pytest.approx(1.0 + 16.0 - 3.0)  # once 3 s of its active phase are left
    assert by_work.left_before[1] == pytest.approx(3.0)
    # a job before that runs on time: the work gate changes nothing
    again = chains.simulate([Phases(1.0, 10.0, 1.0), Phases(2.0, 5.0, 1.0)], [0.0, 8.0], beside(1.0), chain=True,
                            work_left=planned.left_before)
    assert again.starts == planned.starts and again.ends == planned.ends
