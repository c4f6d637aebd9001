"""The packing policy on a simulator fed with rates measured on the GPU (fixtures/*_rates.json, written
by benchmarks/packing/queue_rates.py from a proof's store): each queue is planned from its exclusive
profiles alone (a first pass), then from every pair measured side by side (a second pass), and each plan
is played through chains.simulate with the pairs as measured; pairs nothing measured play at
UNMEASURED each, harsher than any pair the GPUs showed. Every job must stay within 1.1 x the bound as it
lives it, and the queue must finish in at most 0.8 of one job per GPU at a time."""
import glob
import json
import os

import pytest

from radt_ext.packing import chains
from radt_ext.packing.options import PackOptions
from radt_ext.packing.planner import Job, Planner
from radt_ext.packing.profiles import Knowledge, MeasuredGroup, Profile

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUES = sorted(glob.glob(os.path.join(HERE, "fixtures", "*_rates.json")))
BOUND = 1.5
UNMEASURED = 2.5


def knowledge(data: dict, with_pairs: bool) -> Knowledge:
    k = Knowledge(gpu_memory_mib=81559.0)
    for name, j in data["jobs"].items():
        wall = j["startup"] + j["active"] + j["tail"]
        k.profiles[name] = Profile(name, name, duration_s=j["active"], startup_s=j["startup"], e2e_duration_s=wall,
                                   phase="active phase", outside_s=wall - j["active"], throughput=j["throughput"],
                                   mem_mib=j["mem_mib"], sm_pct=j["sm_pct"] or 0.0, dram_pct=j["dram_pct"],
                                   busy_pct=j["busy_pct"], cpu_pct=j["cpu_pct"])
    if with_pairs:
        for n, p in enumerate(data["pairs"]):
            k.groups.append(MeasuredGroup(f"pair{n}", p["mode"], {p["a"]: [p["slowdowns"][0]],
                                                                   p["b"]: [p["slowdowns"][1]]}))
    return k


def truth(data: dict, mode: str):
    known = {}
    for p in data["pairs"]:
        if p["mode"] == mode:
            known[(p["a"], p["b"])] = p["slowdowns"][0]
            known[(p["b"], p["a"])] = p["slowdowns"][1]
    return lambda a, b: known.get((a, b), UNMEASURED)


def replay(data: dict, with_pairs: bool):
    k = knowledge(data, with_pairs)
    jobs = [Job(name, name) for name in data["jobs"]]
    plan = Planner(k, PackOptions(max_slowdown=BOUND, modes=("naive", "mps"))).plan(jobs, ["0", "1"])
    lived, loads = {}, []
    for ds in plan.gpus.values():
        load = 0.0
        for d in ds:
            names = [j.name for j in d.jobs]
            ph = [chains.phases(j.profile) for j in d.jobs]
            x = truth(data, d.mode)
            pair = lambda a, b: x(names[a], names[b]) if abs(a - b) == 1 else UNMEASURED  # noqa: E731
            splits = {i: i - 1 for i, link in enumerate(d.links) if link is not None and link.basis == "trial"
                      and max(x(names[i - 1], names[i]), x(names[i], names[i - 1])) > BOUND}
            played = chains.simulate(ph, d.starts or [0.0], pair, splits)
            for n, s, e, h in zip(names, played.starts, played.ends, ph):
                lived[n] = (e - s) / h.wall
            load += max(played.ends) + plan.overhead_s
        loads.append(load)
    return plan, lived, max(loads) / plan.one_per_gpu_makespan_s()


@pytest.mark.parametrize("path", QUEUES, ids=[os.path.basename(p) for p in QUEUES])
def test_a_measured_queue_keeps_every_job_within_the_bound_and_finishes_sooner(path):
    with open(path) as fh:
        data = json.load(fh)
    plan, lived, ratio = replay(data, with_pairs=False)
    assert max(lived.values()) <= 1.1 * BOUND, lived
    assert ratio <= 0.8
    again, lived2, ratio2 = replay(data, with_pairs=True)
    assert max(lived2.values()) <= 1.1 * BOUND, lived2
    assert ratio2 <= ratio + 0.05


def test_a_failed_trial_between_long_jobs_keeps_both_within_the_bound():
    """Jobs long enough for a trial, side by side at 3x each: the guard's split still keeps both in bounds."""
    data = {"jobs": {n: {"startup": 5.0, "active": 120.0, "tail": 1.0, "throughput": 100.0, "mem_mib": 2000.0,
                         "sm_pct": 20.0, "dram_pct": 5.0, "busy_pct": 30.0, "cpu_pct": 100.0} for n in "abcd"},
            "pairs": [{"a": a, "b": b, "mode": m, "slowdowns": [3.0, 3.0]}
                      for a in "abcd" for b in "abcd" if a != b for m in ("naive", "mps")]}
    plan, lived, ratio = replay(dict(data, pairs=[]), with_pairs=False)
    assert any(link is not None and link.basis == "trial" for d in plan.decisions for link in d.links)
    global UNMEASURED
    harsh, UNMEASURED = UNMEASURED, 3.0
    try:
        _, lived, _ = replay(dict(data, pairs=[]), with_pairs=False)
    finally:
        UNMEASURED = harsh
    assert max(lived.values()) <= BOUND
    _, lived2, _ = replay(data, with_pairs=True)  # measured bad: start-ups beside, no overlap
    assert max(lived2.values()) <= 1.05
