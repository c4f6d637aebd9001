"""Packing that measures: measured pairs and groups read back from a real SQLite store before the model
(by workload hash, mode and GPU model), trials under the guard where nothing was measured, what each
decision rests on, a split trial's lost seconds, a group run's own cost, and disjoint CPU sets for the
jobs of a shared GPU (real child processes; NVML replayed)."""
from __future__ import annotations

import csv
import io
import os
import sys

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.packing import cpusets, executor, explain, profiles, queue
from radt_ext.packing.options import PackOptions
from radt_ext.packing.planner import Decision, Job, Planner
from radt_ext.sweep.spec import load
from tests.radt_ext.helpers import radt
from tests.radt_ext.packing.store import H200, log_group, log_profile
from tests.radt_ext.packing.test_pack_sweep import JOB, spec

EXP = "queue"
HEAVY = (60.0, 20.0, 90.0, 1500.0, 200.0, 0.5)  # SM, DRAM, util %, peak MiB, W, s: naive 1.9 beside another


def test_a_measured_pair_read_back_from_the_store_changes_the_next_plan(tracking_uri):
    log_profile(tracking_uri, EXP, "a", H200["heavy"])
    log_profile(tracking_uri, EXP, "b", H200["heavy"])
    jobs = [Job("a", "a"), Job("b", "b")]
    opts = PackOptions(max_slowdown=1.1, modes=("naive",), trials=False)
    client = MlflowClient(tracking_uri)
    before = Planner(profiles.read(client, EXP), opts).plan(jobs, ["0"])
    assert [len(d.jobs) for d in before.decisions] == [1, 1] and before.decisions[1].basis == "model"
    run = log_group(tracking_uri, EXP, "naive", [("a", 1.04), ("b", 1.06)], model="NVIDIA H100 80GB HBM3",
                    walls=[35.1, 36.0])
    [d] = Planner(profiles.read(client, EXP, "NVIDIA H100 80GB HBM3"), opts).plan(jobs, ["0"]).decisions
    assert d.mode == "naive" and d.slowdowns == [1.04, 1.06]
    assert [d.wall_s(0), d.wall_s(1)] == [35.1, 36.0]  # the same jobs together: their walls as measured then
    assert d.basis == "measured" and d.evidence == [run] and d.basis_text == f"measured (run {run[:8]})"
    assert f"measured together in run {run[:8]}" in d.reason
    assert explain.group_tags(d, 1.1)["pack.evidence"] == run
    # measured on another GPU model, it says nothing about this pool's: the model again
    other = Planner(profiles.read(client, EXP, "NVIDIA H200"), opts).plan(jobs, ["0"])
    assert [len(x.jobs) for x in other.decisions] == [1, 1]
    # measurements alone (pack.model: false): the pair shares on its run, another mode of it does not
    only = PackOptions(max_slowdown=1.5, trials=False, model=False)
    [d] = Planner(profiles.read(client, EXP, "NVIDIA H100 80GB HBM3"), only).plan(jobs, ["0"]).decisions
    assert d.mode == "naive" and d.basis == "measured"
    only.modes = ("mps",)
    split = Planner(profiles.read(client, EXP, "NVIDIA H100 80GB HBM3"), only).plan(jobs, ["0"]).decisions
    assert [len(x.jobs) for x in split] == [1, 1]
    assert split[1].reason == "alone: with a: nothing measured for these jobs in mps (pack.model: false)"


def test_groups_are_predicted_from_a_larger_measured_group_or_from_their_measured_pairs(tracking_uri):
    for key in "abc":
        log_profile(tracking_uri, EXP, key, H200["cnn"])
    trio = log_group(tracking_uri, EXP, "mps", [("a", 1.2), ("b", 1.1), ("c", 1.3)])
    p = Planner(profiles.read(MlflowClient(tracking_uri), EXP), PackOptions())
    d = p.predict([Job("x", "c"), Job("y", "a")], "mps")  # a pair inside the measured trio: at most that slow
    assert d.slowdowns == [1.3, 1.2] and d.evidence == [trio] and "within a group of 3" in d.source
    assert d.walls == [] and d.wall_s(0) == pytest.approx(H200["cnn"][5] * 1.3)  # a part of it: from its slowdown
    pairs = [log_group(tracking_uri, EXP, "naive", [(x, 1.1), (y, 1.05)]) for x, y in ("ab", "ac", "bc")]
    p = Planner(profiles.read(MlflowClient(tracking_uri), EXP), PackOptions())
    d = p.predict([Job("x", "a"), Job("y", "b"), Job("z", "c")], "naive")
    # each one's excess over 1 summed over its pairs: a 0.1 + 0.1, b 0.05 + 0.1, c 0.05 + 0.05
    assert d.slowdowns == pytest.approx([1.2, 1.15, 1.1]) and sorted(d.evidence) == sorted(pairs)
    assert d.source.startswith("measured pairs added")


def test_a_group_the_store_measured_comes_before_one_the_model_admits(tracking_uri):
    light = (3.0, 2.0, 8.0, 1500.0, 120.0, 10.0)  # the model: 1.08 for any two
    for key in "abc":
        log_profile(tracking_uri, EXP, key, light)
    run = log_group(tracking_uri, EXP, "naive", [("a", 1.3), ("c", 1.25)])
    plan = Planner(profiles.read(MlflowClient(tracking_uri), EXP), PackOptions(modes=("naive",))).plan(
        [Job("a", "a"), Job("b", "b"), Job("c", "c")], ["0", "1"])
    [d] = [x for x in plan.decisions if len(x.jobs) == 2]
    # beside b the model would add less wall time (1.08); beside a the store knows what happens (1.3)
    assert sorted(j.name for j in d.jobs) == ["a", "c"] and d.basis == "measured" and d.evidence == [run]


def test_a_group_runs_own_cost_is_read_from_the_store_and_planned():
    from types import SimpleNamespace as NS

    def run(run_id, start, end, tags=None, metrics=None):
        return NS(info=NS(run_id=run_id, start_time=start * 1000, end_time=end * 1000),
                  data=NS(tags=tags or {}, metrics=metrics or {}))

    tags = {"sweep.id": "s", "collocation.gpu": "0"}
    parents = {"p1": run("p1", 0, 12, tags), "p2": run("p2", 13, 24, tags), "p3": run("p3", 26, 40, tags),
               # the next call of the sweep, after this one's report: its gap is not the executor's
               "report": run("report", 41, 42, {"sweep.id": "s", "sweep.role": "report"}),
               "p4": run("p4", 50, 60, tags)}
    kids = {"p1": [run("k1", 0, 11, metrics={"summary/e2e_duration_s": 10.0})],
            "p2": [run("k2", 13, 23, metrics={"summary/e2e_duration_s": 9.0})],
            "p3": [run("k3", 26, 39, metrics={"summary/e2e_duration_s": 11.0})],
            "p4": [run("k4", 50, 59, metrics={"summary/e2e_duration_s": 8.0})]}
    # inside: 2, 2, 3, 2 s (median 2); gaps 1 and 2 s (median 1.5), not the 10 s across the report
    assert profiles.group_overhead(parents, kids) == pytest.approx(3.5)


def test_the_dry_run_names_what_each_decision_rests_on(tmp_path, two_gpus):
    jobs = {n: f"--seconds 0.3{i}" for i, n in enumerate(("a", "b", "c", "d", "e", "f"))}
    path = spec(tmp_path, jobs, extra="pack: {max_jobs_per_gpu: 2}\n")
    with open(path) as fh:
        text = fh.read().replace('devices: ["0", "1"]', 'devices: ["0"]')
    with open(path, "w") as fh:
        fh.write(text)
    keys = {queue.job_name(v)[0]: v.workloads[0].key for v in queue.job_variants(load(path))}
    for name in "ab":  # heavy: the model says 1.9 for the two of them
        log_profile(two_gpus, "queue", keys[name], HEAVY)
    for name in "cd":  # heavier, and far from a and b's profiles: 1.99
        log_profile(two_gpus, "queue", keys[name], (80.0, 40.0, 99.0, 1500.0, 250.0, 0.5))
    for name in "ef":  # light: 1.08
        log_profile(two_gpus, "queue", keys[name], (3.0, 2.0, 8.0, 1500.0, 120.0, 0.5))
    run = log_group(two_gpus, "queue", "naive", [(keys["a"], 1.1), (keys["b"], 1.12)])
    dry = radt("sweep", path, "--dry-run", "--output", "csv", env={"COLUMNS": "250"})
    assert dry.returncode == 0, dry.stderr
    rows = list(csv.DictReader(io.StringIO(dry.stdout)))
    groups = {r["job"]: r["basis"] for r in rows if r["basis"]}  # each group's first job
    assert groups == {"a-0": f"measured (run {run[:8]})", "c-2": "trial (model 1.99)", "e-4": "model"}
    assert sorted(r["job"] for r in rows) == ["a-0", "b-1", "c-2", "d-3", "e-4", "f-5"]
    assert "on trial, planned at 1.50 <= 1.5" in next(r["why"] for r in rows if r["job"] == "c-2")
    assert "(1 measured, 1 model, 1 trial)" in " ".join(dry.stderr.split())


def test_a_trial_beyond_the_bound_is_split_its_lost_time_tagged_and_its_jobs_on_their_own_cpus(tmp_path, two_gpus):
    seen = tmp_path / "cpus.txt"
    path = tmp_path / "queue.yaml"
    path.write_text(open(spec(tmp_path, {"a": f"--seconds 3 --cpus-to {seen}", "b": f"--seconds 4 --cpus-to {seen}"}))
                    .read().replace('devices: ["0", "1"]', 'devices: ["0"]'))
    for v in queue.job_variants(load(str(path))):  # a's profile did far more alone than it can here
        log_profile(two_gpus, "queue", v.workloads[0].key, HEAVY, whole=HEAVY,
                    throughput=1e6 if v.index == 0 else 1.0)
    dry = radt("sweep", str(path), "--dry-run", "--output", "csv")
    assert dry.returncode == 0 and "trial (model 1.90)" in dry.stdout, dry.stdout + dry.stderr
    done = radt("sweep", str(path), env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stdout + done.stderr
    client = MlflowClient(two_gpus)
    exp = client.get_experiment_by_name("queue").experiment_id
    (group,) = client.search_runs([exp], "tags.`collocation.size` = '2'")
    tags = group.data.tags
    assert tags["pack.basis"] == "trial (model 1.90)" and "on trial" in tags["pack.reason"]
    assert tags["pack.outcome"].startswith("split: ") and " a-0 live " in tags["pack.outcome"]
    assert "every companion paused until its active phase ended" in tags["pack.outcome"]
    assert float(tags["pack.lost_s"]) > 0 and "s lost" in tags["collocation.guard"]
    kids = {k.data.tags["collocation.workload"]: k for k in
            client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{group.info.run_id}'")}
    assert kids["a-0"].data.metrics["summary/guard_lost_s"] == pytest.approx(float(tags["pack.lost_s"]), rel=0.01)
    # disjoint CPU sets: each job's, as recorded and as the job itself saw it
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        want = cpusets.split(cpus, [1.0, 1.0])
        assert [kids[n].data.tags["pack.cpus"] for n in ("a-0", "b-1")] == [cpusets.text(c) for c in want]
        got = sorted(line.split()[1] for line in seen.read_text().splitlines())
        assert got == sorted(cpusets.text(c) for c in want)
    report = client.search_runs([exp], "tags.`sweep.role` = 'report'")[0]
    html = open(os.path.join(report.info.artifact_uri.replace("file://", ""), "radt_ext_sweep_report.html")).read()
    assert "basis (measured, model, trial)" in html and "trial (model 1.90)" in html
    # what the next plan reads: the trial measured beyond the bound, so the pair is kept apart on that basis
    known = profiles.read(client, "queue")
    assert known.groups[0].guarded and known.groups[0].run_id == group.info.run_id
    plan = Planner(known, PackOptions(modes=("naive",))).plan(queue.jobs_of(queue.job_variants(load(str(path)))), ["0"])
    assert [len(d.jobs) for d in plan.decisions] == [1, 1]
    assert plan.decisions[1].basis_text == f"measured (run {group.info.run_id[:8]})"
    assert f"(naive, measured together in run {group.info.run_id[:8]})" in plan.decisions[1].reason


def test_a_trial_has_no_weights_so_its_first_split_pauses_every_companion():
    jobs = [Job(n, n, profile=profiles.Profile(n, f"run-{n}", sm_pct=sm, dram_pct=5.0))
            for n, sm in zip("abc", (90.0, 40.0, 10.0))]
    trial = Decision(jobs, "mps", [1.5] * 3, [None] * 3, [None] * 3, "trial", "", basis="trial")
    model = Decision(jobs, "mps", [1.2] * 3, [None] * 3, [None] * 3, "model", "", basis="model")
    assert executor._weights(trial) == {}
    assert executor._weights(model) == {"a": pytest.approx(0.9), "b": pytest.approx(0.4), "c": pytest.approx(0.1)}


def test_cpu_sets_split_each_gpus_part_of_the_host_by_cpu_use():
    assert cpusets.gpu_block("1", ["0", "1"], list(range(16))) == list(range(8, 16))
    assert cpusets.split(list(range(8, 16)), [6.0, 1.0]) == [list(range(8, 14)), [14, 15]]
    assert cpusets.split([0, 1], [1.0, 1.0]) == [[0], [1]]
    assert cpusets.split([0], [1.0, 1.0]) is None
    sets, why = cpusets.assign("0", ["0", "1"], [700.0, 100.0], cpus=[0, 1])
    assert sets is None and why == "not pinned: 1 CPU(s) for GPU 0's part of the host, 2 jobs"
    assert cpusets.text([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"


def test_bad_trials_and_cpu_sets_values_are_one_line(tmp_path, two_gpus):
    for key in ("trials", "model", "cpu_sets"):
        res = radt("sweep", spec(tmp_path, {"a": "--seconds 0.3"}, extra=f"pack: {{{key}: maybe}}\n"))
        assert res.returncode == 2 and f"pack.{key}: expected true or false, got 'maybe'" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
