"""benchmarks/packing/simulate_long.py on a committed queue: its jobs' active phases x10, planned with
the pairs its store measured (side by side for as long as both budgets pay) and played as the runner and
the guard would run it. Every job stays within the bound as it lives it, pairs measured within the bound
run side by side for most of their length, a first pass (nothing measured) tries pairs under the guard, and
the plain makespan is the queue's order on two GPUs."""
import json
import os

import pytest

from benchmarks.packing import simulate_long as sim
from radt_ext.packing import chains

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def unmodified():
    with open(os.path.join(HERE, "fixtures", sim.QUEUES["unmodified"])) as fh:
        return sim.scaled(json.load(fh), sim.SCALE)


def test_the_long_queue_packed_keeps_every_job_within_the_bound_and_shares_whole_lengths(unmodified):
    packed = sim.replay(unmodified, with_pairs=True, trials=True)
    assert len(packed["lived"]) == len(unmodified["jobs"])
    assert max(packed["lived"].values()) <= chains.PLAN_SHARE * sim.BOUND + 0.05, packed["lived"]
    assert abs(packed["planned_makespan_s"] - packed["makespan_s"]) <= 0.10 * packed["makespan_s"]
    # the pair measured closest to free (loader6 beside loader2, 1.21/1.08): side by side nearly all along
    best = min(unmodified["pairs"], key=lambda p: max(p["slowdowns"]))
    k = sim.knowledge(unmodified, with_pairs=True)
    cp = chains.ChainPlanner(k, best["mode"], sim.BOUND, True, None)
    a, b = best["a"], best["b"]
    ja, jb = (sim.Job(n, n, profile=k.profiles[n]) for n in (a, b))
    link = cp.link(ja, jb)
    assert link.basis == "measured" and link.overlap_s >= 0.9 * chains.phases(ja.profile).active
    alone = sim.replay(unmodified, with_pairs=False, trials=False)
    assert max(alone["lived"].values()) <= chains.PLAN_SHARE * sim.BOUND + 0.05
    assert packed["makespan_s"] < alone["makespan_s"]


def test_the_plain_makespan_lays_the_queue_out_in_its_order_over_the_gpus():
    data = {"order": ["a", "b", "c"], "jobs": {n: {"startup": 1.0, "active": w, "tail": 0.0}
                                                for n, w in (("a", 9.0), ("b", 2.0), ("c", 4.0))}}
    assert sim.plain_makespan_s(data, 2) == 10.0  # a on one GPU; b then c on the other (3 + 5 s)
    assert sim.plain_makespan_s(dict(data, order=["a", "c", "b"]), 2) == 10.0
    assert sim.plain_makespan_s(dict(data, order=["b", "c", "a"]), 2) == 13.0  # a after b (3 + 10 s)


def test_a_first_pass_tries_unmeasured_pairs_under_the_guard_and_keeps_every_job_within_the_bound(unmodified):
    first = sim.replay(unmodified, with_pairs=False, trials=True)
    trials = [link for d in first["plan"].decisions for link in d.links if link is not None and link.basis == "trial"]
    assert trials and max(first["lived"].values()) <= chains.PLAN_SHARE * sim.BOUND + 0.05, first["lived"]
    # the figures simulate_long writes for it, beside those of start-ups only and of the pairs measured
    with open(os.path.join(HERE, "fixtures", sim.QUEUES["long"])) as fh:
        out = sim.queue(json.load(fh))
    for name in ("chains", "first", "packed"):
        assert {name, f"{name}_makespan_s", f"{name}_max_job_slowdown", f"{name}_plan_error"} <= set(out)
        assert out[f"{name}_max_job_slowdown"] <= chains.PLAN_SHARE * sim.BOUND + 0.05
    assert out["first_links_side_by_side"] >= 1 and out["first"] < out["chains"]
    # measuring every pair first (its seconds counted) beside the packed plan alone
    assert out["measuring_s"] > 0 and out["measured_first"] == pytest.approx(
        (out["measuring_s"] + out["packed_makespan_s"]) / out["plain_makespan_s"], abs=2e-3)


def test_measuring_each_job_alone_and_every_pair_lays_its_groups_on_the_gpu_free_soonest():
    data = {"jobs": {n: {"startup": s, "active": 50.0, "tail": 0.0} for n, s in (("a", 1.0), ("b", 3.0), ("c", 2.0))}}
    # groups a, b, c, a+b, a+c, b+c: each its (longer) start-up + MEASURE_S + GROUP_S
    each = [s + sim.MEASURE_S + sim.GROUP_S for s in (1.0, 3.0, 2.0, 3.0, 2.0, 3.0)]
    assert sim.measuring_s(data, gpus=1) == pytest.approx(sum(each))
    free = [0.0, 0.0]
    for x in each:
        free[free.index(min(free))] += x
    assert sim.measuring_s(data, gpus=2) == pytest.approx(max(free))
