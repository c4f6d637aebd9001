"""The packing policy on a simulator fed with rates measured on the GPU (fixtures/*_rates.json, written
by benchmarks/packing/queue_rates.py from a proof's store): each queue is planned from its exclusive
profiles alone (a first pass), then from every pair measured side by side (a second pass), and each plan
is played through chains.simulate with the pairs as measured, each chain's jobs started as the group
runner starts them (job k only once job k-2 has ended); pairs nothing measured play at UNMEASURED each,
harsher than any pair the GPUs showed, and a start-up beside an active phase as the store measured it,
else at BOOT (model.BOOT_LIGHT for a light job paced by its launches, which the plan keeps apart). Every job must stay within 1.1 x the bound as it lives it (by
wall or, stopping on time, by work), the queue must finish in at most 0.8 of one job per GPU at a time
(a queue of long jobs: its second plan, from the pairs measured), and the plan must predict its makespan
within 10 %."""
import glob
import json
import os

import pytest

from benchmarks.packing import simulate_long
from benchmarks.packing.simulate_long import BOUND
from radt_ext.packing import chains

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUES = sorted(glob.glob(os.path.join(HERE, "fixtures", "*_rates.json")))


def replay(data: dict, with_pairs: bool, unmeasured: float = simulate_long.UNMEASURED):
    """The plan, each job's lived slowdown, the makespan over one job per GPU's, and the plan's error."""
    r = simulate_long.replay(data, with_pairs, trials=True, unmeasured=unmeasured)
    error = abs(r["planned_makespan_s"] - r["makespan_s"]) / r["makespan_s"]
    return r["plan"], r["lived"], r["makespan_s"] / r["one_per_gpu_s"], error


# jobs of a minute or more: start-ups are a small share of them, so a first plan (start-ups beside active
# phases) gains little; the pairs its pass measured must
LONG = {"long_h200_rates.json"}


@pytest.mark.parametrize("path", QUEUES, ids=[os.path.basename(p) for p in QUEUES])
def test_a_measured_queue_keeps_every_job_within_the_bound_and_finishes_sooner(path):
    with open(path) as fh:
        data = json.load(fh)
    long = os.path.basename(path) in LONG
    plan, lived, ratio, error = replay(data, with_pairs=False)
    assert max(lived.values()) <= 1.1 * BOUND, lived
    assert ratio <= (1.0 if long else 0.8) and error <= 0.10
    again, lived2, ratio2, error2 = replay(data, with_pairs=True)
    assert max(lived2.values()) <= 1.1 * BOUND, lived2
    assert ratio2 <= (0.8 if long else ratio + 0.05) and error2 <= 0.10


def test_a_failed_trial_between_long_jobs_keeps_both_within_the_bound():
    """Jobs long enough for a trial, side by side at 3x each: the guard's split still keeps both in bounds."""
    data = {"jobs": {n: {"startup": 5.0, "active": 120.0, "tail": 1.0, "throughput": 100.0, "mem_mib": 2000.0,
                         "sm_pct": 20.0, "dram_pct": 5.0, "busy_pct": 30.0, "cpu_pct": 100.0} for n in "abcd"},
            "pairs": [{"a": a, "b": b, "mode": m, "slowdowns": [3.0, 3.0]}
                      for a in "abcd" for b in "abcd" if a != b for m in ("naive", "mps")]}
    plan, lived, ratio, _ = replay(dict(data, pairs=[]), with_pairs=False)
    assert any(link is not None and link.basis == "trial" for d in plan.decisions for link in d.links)
    _, lived, _, _ = replay(dict(data, pairs=[]), with_pairs=False, unmeasured=3.0)
    assert max(lived.values()) <= BOUND
    _, lived2, _, _ = replay(data, with_pairs=True)  # measured bad: start-ups beside, no overlap
    assert max(lived2.values()) <= 1.05


def test_a_queue_of_long_start_ups_and_sub_second_active_phases_is_planned_as_the_runner_runs_it():
    """Seven jobs of 16-25 s start-up and about 1 s of active phase: the runner starts job k of a chain
    only once job k-2 has ended, and the plan says so; chained as if three or more could start up at
    once, the plan would promise about half the makespan."""
    data = {"jobs": {f"r{n}": {"startup": 16.0 + 1.5 * n, "active": 0.6 + 0.1 * n, "tail": 0.8, "throughput": 50.0,
                               "mem_mib": 3000.0, "sm_pct": 30.0, "dram_pct": 5.0, "busy_pct": 35.0, "cpu_pct": 100.0}
                     for n in range(7)}, "pairs": []}
    for with_pairs in (False, True):
        plan, lived, ratio, error = replay(data, with_pairs)
        assert error <= 0.10, (error, plan.predicted_makespan_s())
        assert max(lived.values()) <= 1.1 * BOUND and ratio < 1.0
        for d in plan.decisions:  # never three of a chain's jobs alive at once, in the plan itself
            played = chains.ChainPlanner.play([chains.phases(j.profile) for j in d.jobs], d.starts, d.links)
            for n in range(2, len(d.jobs)):
                assert played.starts[n] >= played.ends[n - 2] - 1e-6
    # planned as if a job's start-up could begin whenever the job before's active phase lets it (three or more
    # alive at once), the chain would promise far less than the runner gives
    d = max(plan.decisions, key=lambda d: len(d.jobs))
    ph = [chains.phases(j.profile) for j in d.jobs]
    assert len(ph) >= 3
    starts = [0.0]
    for k in range(1, len(ph)):
        starts.append(max(starts[-1], starts[-1] + ph[k - 1].startup + ph[k - 1].active - ph[k].startup))
    loose = chains.simulate(ph, starts, lambda a, b: 1.0)
    assert max(loose.ends) < 0.8 * d.makespan_s
