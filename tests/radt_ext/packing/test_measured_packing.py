"""Packing that measures: pairs a group run measured side by side (its parent's tag `collocation.pairs`)
read back from a real SQLite store (by workload hash, mode and GPU model) as the links the next plan
rests on, a group run's own cost, what the dry run says each job follows, and a chain run end to end
with its jobs started in turn on CPU sets of their own (real child processes; NVML replayed)."""
from __future__ import annotations

import csv
import io
import os
import sys

import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from radt_ext.collocation import pairs
from radt_ext.packing import chains, cpusets, explain, model, profiles, queue
from radt_ext.packing.options import PackOptions
from radt_ext.packing.planner import Job, Planner
from radt_ext.sweep.spec import load
from tests.radt_ext.helpers import radt
from tests.radt_ext.packing.store import log_pair, log_profile
from tests.radt_ext.packing.test_pack_sweep import spec

EXP = "queue"
H100 = "NVIDIA H100 80GB HBM3"


def long_job(uri: str, key: str, model: str | None = None) -> None:
    """5 s of start-up, 30 s of active phase, 1 s of wind-down: too short a budget for a trial after it."""
    log_profile(uri, EXP, key, (40.0, 10.0, 50.0, 2000.0, 250.0, 30.0), whole=(20.0, 5.0, 25.0, 2000.0, 150.0, 36.0),
                startup_s=5.0, model=model)


def test_a_pair_measured_side_by_side_is_read_back_and_the_next_plan_rests_on_it(tracking_uri):
    long_job(tracking_uri, "a", H100)
    long_job(tracking_uri, "b", H100)
    jobs = [Job("a", "a"), Job("b", "b")]
    opts = PackOptions(modes=("naive",))
    client = MlflowClient(tracking_uri)
    [before] = Planner(profiles.read(client, EXP, H100), opts).plan(jobs, ["0"]).decisions
    assert before.basis == "start-up" and [link.basis for link in before.links[1:]] == ["start-up"]
    run = log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.1), ("b-1", "b", 1.15)], model=H100)
    k = profiles.read(client, EXP, H100)
    [g] = k.groups
    assert (g.run_id, g.mode, g.slowdowns, g.gpu_model) == (run, "naive", {"a": [1.1], "b": [1.15]}, H100)
    [d] = Planner(k, opts).plan(jobs, ["0"]).decisions
    first = d.jobs[0].name
    assert d.basis == "measured" and d.evidence == [run] and d.basis_text == f"measured (run {run[:8]})"
    link = d.links[1]
    x = (1.1, 1.15) if first == "a" else (1.15, 1.1)
    assert link.basis == "measured" and link.slowdowns == x and link.overlap_s > 0
    assert f"{d.jobs[1].name}: measured (run {run[:8]}: {x[0]:.2f}/{x[1]:.2f})" in d.reason
    assert d.makespan_s < before.makespan_s and d.max_slowdown <= chains.PLAN_SHARE * opts.max_slowdown
    assert explain.group_tags(d, 1.5)["pack.evidence"] == run
    assert explain.job_tags(d, 1)["pack.link"] == link.text()
    assert explain.job_tags(d, 1)["pack.start_offset_s"] == f"{d.starts[1] - d.starts[0]:.2f}"
    # measured on another GPU model, it says nothing about this pool's; measured in naive, nothing about mps
    assert profiles.read(client, EXP, "NVIDIA H200").groups == []
    [other] = Planner(profiles.read(client, EXP, "NVIDIA H200"), opts).plan(jobs, ["0"]).decisions
    assert other.basis == "start-up"
    [mps] = Planner(k, PackOptions(modes=("mps",))).plan(jobs, ["0"]).decisions
    assert mps.basis == "start-up"


def test_pairs_measured_in_another_experiment_are_known_to_the_first_plan(tracking_uri):
    """pack.pairs_from: a sweep of two-job groups of the same commands (the same workload hashes) measured the
    pair elsewhere; the queue's first plan lays it side by side as measured, and takes nothing else from there."""
    long_job(tracking_uri, "a", H100)
    long_job(tracking_uri, "b", H100)
    log_profile(tracking_uri, "pairs", "c", (40.0, 10.0, 50.0, 2000.0, 250.0, 30.0), model=H100)  # its own profile
    run = log_pair(tracking_uri, "pairs", "mps", [("a-0", "a", 1.05), ("b-1", "b", 1.1)], model=H100)
    client = MlflowClient(tracking_uri)
    jobs = [Job("a", "a"), Job("b", "b")]
    opts = PackOptions(modes=("mps",), pairs_from=("pairs",))
    [alone] = Planner(profiles.read(client, EXP, H100), opts).plan(jobs, ["0"]).decisions
    assert alone.basis == "start-up"
    k = profiles.read_with(client, EXP, opts.pairs_from, H100)
    assert [g.run_id for g in k.groups] == [run] and set(k.profiles) == {"a", "b"} and k.packed_done == {}
    [d] = Planner(k, opts).plan(jobs, ["0"]).decisions
    assert d.basis == "measured" and d.evidence == [run] and d.links[1].overlap_s > 0
    assert d.makespan_s < alone.makespan_s
    again = profiles.read_with(client, EXP, ("pairs", EXP, "pairs"), H100)  # each experiment's pairs once
    assert [g.run_id for g in again.groups] == [run]
    with pytest.raises(profiles.NoPairsSource) as err:
        profiles.read_with(client, EXP, ("pairs", "nowhere"), H100)
    assert "pack.pairs_from: no experiment 'nowhere' in the store" in str(err.value) and "\n" not in str(err.value)


def test_a_pair_of_one_workload_twice_is_read_back_for_both_of_its_jobs(tracking_uri):
    long_job(tracking_uri, "a")
    run = log_pair(tracking_uri, EXP, "mps", [("a-0", "a", 1.2), ("a-1", "a", 1.3)])
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    assert k.groups[0].slowdowns == {"a": [1.2, 1.3]}
    [d] = Planner(k, PackOptions(modes=("mps",))).plan([Job("x", "a"), Job("y", "a")], ["0"]).decisions
    assert d.mode == "mps" and d.basis == "measured" and d.links[1].slowdowns == (1.2, 1.3) and d.evidence == [run]


def test_only_a_shared_groups_well_formed_pairs_of_its_own_workloads_are_read(tracking_uri):
    long_job(tracking_uri, "a")
    long_job(tracking_uri, "b")
    log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.1), ("b-1", "b", 1.1)], tag="not json")
    log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.1), ("b-1", "b", 1.1)],
             tag='[{"a": "a-0", "b": "b-1", "slowdowns": [1.1]}]')  # one slowdown: not a pair
    log_pair(tracking_uri, EXP, "naive", [("a-0", "a", 1.1), ("b-1", "b", 1.1)],
             tag='[{"a": "a-0", "b": "elsewhere", "slowdowns": [1.1, 1.1]}]')  # not one of its workloads
    log_pair(tracking_uri, EXP, "exclusive", [("a-0", "a", 1.1), ("b-1", "b", 1.1)])  # no sharing mode
    assert profiles.read(MlflowClient(tracking_uri), EXP).groups == []
    assert pairs.read("not json") == [] and pairs.read(None) == []


def test_a_group_runs_own_cost_is_read_from_the_store_and_planned(tracking_uri):
    client = MlflowClient(tracking_uri)
    exp = client.create_experiment(EXP)

    def run(start: float, end: float, tags: dict, parent: str | None = None, wall: float | None = None) -> str:
        run_id = client.create_run(exp, start_time=int(start * 1000),
                                   tags={**tags, **({"mlflow.parentRunId": parent} if parent else {})}).info.run_id
        if wall is not None:
            client.log_batch(run_id, metrics=[Metric("summary/e2e_duration_s", wall, 0, 0)])
        client.set_terminated(run_id, "FINISHED", end_time=int(end * 1000))
        return run_id

    t0, tags = 1.7e9, {"sweep.id": "s", "collocation.gpu": "0"}
    for start, end, wall in ((0, 12, 10.0), (13, 24, 9.0), (26, 40, 11.0), (50, 60, 8.0)):
        parent = run(t0 + start, t0 + end, tags)
        run(t0 + start, t0 + end - 1, {}, parent, wall)
    # the next call of the sweep comes after this one's report: the gap across it is not the executor's
    run(t0 + 41, t0 + 42, {"sweep.id": "s", "sweep.role": "report"})
    log_profile(tracking_uri, EXP, "a", (40.0, 10.0, 50.0, 2000.0, 250.0, 8.0))
    k = profiles.read(client, EXP)
    # inside each group run: 2, 2, 3, 2 s (median 2); gaps 1 and 2 s (median 1.5), not the 9 s across the report
    assert k.group_overhead_s == pytest.approx(3.5)
    plan = Planner(k, PackOptions()).plan([Job("a", "a")], ["0"])
    [d] = plan.decisions
    assert d.overhead_s == pytest.approx(3.5) and d.makespan_s == pytest.approx(8.0 + 3.5)
    assert plan.one_per_gpu_makespan_s() == pytest.approx(8.0 + 3.5)
    assert explain.group_tags(d, 1.5)["pack.predicted_overhead_s"] == "3.50"


def dry_rows(path: str) -> list[dict]:
    dry = radt("sweep", path, "--dry-run", "--output", "csv", env={"COLUMNS": "250"}, cwd=os.path.dirname(path))
    assert dry.returncode == 0, dry.stderr
    return list(csv.DictReader(io.StringIO(dry.stdout))), " ".join(dry.stderr.split())


def one_gpu(path: str) -> str:
    with open(path) as fh:
        text = fh.read().replace('devices: ["0", "1"]', 'devices: ["0"]')
    with open(path, "w") as fh:
        fh.write(text)
    return path


def test_the_dry_run_says_how_each_job_follows_the_one_before(tmp_path, two_gpus):
    path = one_gpu(spec(tmp_path, {n: f"--seconds 0.3{i}" for i, n in enumerate("abcd")},
                        extra="pack: {max_jobs_per_gpu: 4}\n"))
    keys = {queue.job_name(v)[0]: v.workloads[0].key for v in queue.job_variants(load(path))}
    for name in "abc":  # 5 s of start-up, 30 s active
        long_job(two_gpus, keys[name])
    run = log_pair(two_gpus, EXP, "naive", [("a-0", keys["a"], 1.1), ("b-1", keys["b"], 1.12)])
    rows, stderr = dry_rows(path)
    assert sorted(r["job"] for r in rows) == ["a-0", "b-1", "c-2", "d-3"]
    # the job nothing profiled runs alone first; the other three one after another
    follows = {r["job"]: r["follows_the_job_before"] for r in rows}
    assert follows["d-3"] == "-" and "no exclusive profile in the store" in next(r["why"] for r in rows
                                                                                  if r["job"] == "d-3")
    chain = [r["job"] for r in rows if r["job"] != "d-3"]
    assert follows[chain[0]] == "-"
    assert any(f.startswith(f"measured (run {run[:8]}: ") for f in follows.values())
    assert any(f.startswith("its start-up beside the job before") for f in follows.values())
    assert [float(r["start_s"]) for r in rows if r["job"] in chain] == sorted(
        float(r["start_s"]) for r in rows if r["job"] in chain)
    assert "4 jobs in 2 groups on 1 GPU(s), 3 in chains (1 measured)" in stderr


def test_a_chain_runs_its_jobs_in_turn_each_on_its_own_cpus_and_tags_what_it_planned(tmp_path, two_gpus):
    seen = tmp_path / "cpus.txt"
    path = one_gpu(spec(tmp_path, {"a": f"--seconds 1.5 --cpus-to {seen}", "b": f"--seconds 1.6 --cpus-to {seen}"}))
    keys = {queue.job_name(v)[0]: v.workloads[0].key for v in queue.job_variants(load(path))}
    for key in keys.values():  # 1 s of start-up, 1.5 s active: the next job starts 1 s before the active phase ends
        log_profile(two_gpus, EXP, key, (40.0, 10.0, 50.0, 1500.0, 200.0, 1.5),
                    whole=(20.0, 5.0, 25.0, 1500.0, 150.0, 2.6), startup_s=1.0)
    done = radt("sweep", path, env={"COLUMNS": "250"}, cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    client = MlflowClient(two_gpus)
    exp = client.get_experiment_by_name(EXP).experiment_id
    (group,) = client.search_runs([exp], "tags.`collocation.size` = '2'")
    tags = group.data.tags
    assert tags["pack.decision"].startswith("naive chain of 2: ") and tags["pack.basis"] == "start-up"
    assert tags["pack.outcome"].startswith("as planned: no pause") and tags["pack.lost_s"] == "0"
    kids = sorted(client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{group.info.run_id}'"),
                  key=lambda r: r.info.start_time)
    first, second = kids
    offset = float(second.data.tags["pack.start_offset_s"])
    # its 1 s start-up ends as the first one's active phase does, that slowed x times beside it
    x = model.BOOT
    assert offset == pytest.approx(2.5 - 1.0 / x, abs=0.01) and "pack.start_offset_s" not in first.data.tags
    assert second.data.tags["pack.link"] == f"its start-up beside the job before at {x:.2f} (model)"
    started = [float(k.data.tags["collocation.started_s"]) for k in kids]
    assert started[1] - started[0] >= offset - 0.2  # started in turn, not with the group
    for k in kids:  # the slowdown as the job lived it: its wall time here over its wall time alone
        m = k.data.metrics
        assert m["summary/slowdown_ratio"] == pytest.approx(m["summary/e2e_duration_s"] / 2.6, rel=1e-3)
        assert k.data.tags["collocation.slowdown_basis"] == "wall"
    # disjoint CPU sets: each job's, as recorded and as the job itself saw it
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        want = cpusets.split(cpus, [1.0, 1.0])
        assert sorted(k.data.tags["pack.cpus"] for k in kids) == sorted(cpusets.text(c) for c in want)
        got = sorted(line.split()[1] for line in seen.read_text().splitlines())
        assert got == sorted(cpusets.text(c) for c in want)


def test_cpu_sets_split_each_gpus_part_of_the_host_by_cpu_use():
    assert cpusets.gpu_block("1", ["0", "1"], list(range(16))) == list(range(8, 16))
    assert cpusets.split(list(range(8, 16)), [6.0, 1.0]) == [list(range(8, 14)), [14, 15]]
    assert cpusets.split([0, 1], [1.0, 1.0]) == [[0], [1]]
    assert cpusets.split([0], [1.0, 1.0]) is None
    sets, why = cpusets.assign("0", ["0", "1"], [700.0, 100.0], cpus=[0, 1])
    assert sets is None and why == "not pinned: 1 CPU(s) for GPU 0's part of the host, 2 jobs"
    assert cpusets.text([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


def test_bad_trials_and_cpu_sets_values_are_one_line(tmp_path, two_gpus):
    for key in ("trials", "cpu_sets"):
        res = radt("sweep", spec(tmp_path, {"a": "--seconds 0.3"}, extra=f"pack: {{{key}: maybe}}\n"))
        assert res.returncode == 2 and f"pack.{key}: expected true or false, got 'maybe'" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
