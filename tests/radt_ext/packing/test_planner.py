"""The planner on profiles read back from a real SQLite store (store.py): what a profile says of a job
(fallback names, active phase, GPU model, start-up), the chains it builds, one a GPU (each job's start-up
beside the active phase of the job before), what it predicts against one job per GPU, and where a job
runs alone or after another (memory)."""
from __future__ import annotations

import json
import os

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.packing import chains, explain, model, profiles
from radt_ext.packing.options import PackOptions
from radt_ext.packing.planner import Job, Planner
from radt_ext.packing.profiles import Knowledge, Profile
from tests.radt_ext.packing.store import GPU_MIB, H200, IDLE_W, log_profile

EXP = "queue"


def knowledge(uri, **figures):
    for key, figs in figures.items():
        log_profile(uri, EXP, key, figs)
    return profiles.read(MlflowClient(uri), EXP)


def by_job(plan):
    return {j.name: d for d in plan.decisions for j in d.jobs}


def test_profiles_are_read_back_with_their_fallback_names(tracking_uri):
    k = knowledge(tracking_uri, cnn=H200["cnn"])
    p = k.profiles["cnn"]
    assert (p.sm_pct, p.dram_pct, p.busy_pct, p.mem_mib, p.power_w, p.duration_s, p.idle_power_w) == \
        (2.8, 1.5, 9.0, 2100.0, 123.3, 23.0, IDLE_W)
    assert p.phase == "whole run" and k.gpu_memory_mib == GPU_MIB
    assert p.alone_energy_j == pytest.approx(123.3 * 23.0)
    assert chains.phases(p) == chains.Phases(0.0, 23.0, 0.0)  # a whole-run profile: all of it active


def test_active_phase_figures_come_before_the_whole_runs(tracking_uri):
    active, whole = (3.5, 2.0, 10.0, 2000.0, 130.0, 20.0), (2.8, 1.5, 9.0, 2100.0, 123.3, 23.0)
    log_profile(tracking_uri, EXP, "cnn", active, whole=whole)
    p = profiles.read(MlflowClient(tracking_uri), EXP).profiles["cnn"]
    assert (p.sm_pct, p.dram_pct, p.busy_pct, p.mem_mib, p.power_w, p.duration_s) == active
    assert p.phase == "active phase" and p.idle_power_w == IDLE_W


def test_a_profile_measured_on_the_pools_gpu_model_comes_first(tracking_uri):
    h200 = log_profile(tracking_uri, EXP, "cnn", H200["cnn"], model="NVIDIA H200")
    h100 = log_profile(tracking_uri, EXP, "cnn", H200["heavy"], model="NVIDIA H100 80GB HBM3")  # newer
    client = MlflowClient(tracking_uri)
    assert profiles.read(client, EXP, "NVIDIA H200").profiles["cnn"].run_id == h200
    assert profiles.read(client, EXP, "NVIDIA H100 80GB HBM3").profiles["cnn"].run_id == h100
    assert profiles.read(client, EXP).profiles["cnn"].run_id == h100  # a mixed pool: the newest
    assert profiles.read(client, EXP, "NVIDIA A100").profiles["cnn"].run_id == h100  # none on it: the newest


# ResNet-18-like: active phase (SM %, DRAM %, util %, peak MiB, W, s) and the whole run around it
R18_ACTIVE, R18_WHOLE = (30.0, 10.0, 40.0, 3000.0, 250.0, 2.0), (5.0, 2.0, 8.0, 3000.0, 120.0, 15.0)


def test_a_jobs_phases_are_its_logged_startup_its_active_phase_and_the_rest_and_energy_covers_the_whole_run(
        tracking_uri):
    # outside the active phase (start-up, wind-down) 15 - 2 = 13 s; the whole run's 1800 J less the
    # active phase's 250 W x 2 s: 100 W outside it
    log_profile(tracking_uri, EXP, "r18", R18_ACTIVE, whole=R18_WHOLE, energy_j=1800.0, startup_s=12.0)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    p = k.profiles["r18"]
    assert (p.duration_s, p.outside_s, p.outside_power_w(), p.alone_energy_j) == \
        pytest.approx((2.0, 13.0, 100.0, 1800.0))
    assert chains.phases(p) == chains.Phases(12.0, 2.0, 1.0)  # start-up as logged, the rest wind-down
    plan = Planner(k, PackOptions()).plan([Job(f"r{i}", "r18") for i in range(3)], ["0"])
    [d] = plan.decisions
    # each one's start-up beside the active phase of the one before, its 12 s of start-up ending as that 2 s
    # active phase (slowed x times beside it) ends; the third only once the first has ended, as the runner
    # starts a chain's jobs
    x = model.BOOT
    assert d.source == "chain" and [link.basis for link in d.links[1:]] == ["start-up", "start-up"]
    assert [link.boot for link in d.links[1:]] == [x, x]
    assert d.starts[:2] == pytest.approx([0.0, 12.0 + 2.0 * x - 12.0])
    assert d.starts[2] == pytest.approx(d.starts[0] + d.wall_s(0))
    assert d.slowdowns[0] == pytest.approx(1 + 2.0 * (x - 1) / 15.0)  # its active phase x times as long
    assert max(d.slowdowns) <= chains.PLAN_SHARE * 1.5
    assert plan.predicted_makespan_s() == pytest.approx(d.starts[2] + d.wall_s(2))
    assert plan.one_per_gpu_makespan_s() == pytest.approx(3 * 15.0)
    assert d.energies == pytest.approx([1800.0] * 3)  # each its whole run's energy alone
    assert f"ratio {plan.predicted_makespan_s() / 45.0:.2f}" in explain.totals_line(plan)
    tags = explain.job_tags(d, 1)
    assert tags["pack.predicted_wall_s"] == f"{d.wall_s(1):.2f}" and tags["pack.predicted_slowdown"] == f"{d.slowdowns[1]:.4f}"
    assert tags["pack.start_offset_s"] == f"{d.starts[1]:.2f}"
    assert tags["pack.link"] == f"its start-up beside the job before at {x:.2f} (model)"
    assert "pack.start_offset_s" not in explain.job_tags(d, 0)


def test_a_profile_splits_the_wall_time_into_start_up_active_phase_and_wind_down(tracking_uri):
    late = dict(figures=(60.0, 70.0, 90.0, 30000.0, 400.0, 4.0), whole=(10.0, 12.0, 15.0, 30000.0, 150.0, 36.0),
                startup_s=24.0, busy=(20.0, 34.0))
    log_profile(tracking_uri, EXP, "late", child_later_s=0.5, **late)
    ph = chains.phases(profiles.read(MlflowClient(tracking_uri), EXP).profiles["late"])
    assert (ph.startup, ph.active, ph.tail) == pytest.approx((24.0, 4.0, 8.0))  # 36 s in all
    log_profile(tracking_uri, EXP, "old", (60.0, 70.0, 90.0, 30000.0, 400.0, 4.0))  # no active phase: the whole run
    old = chains.phases(profiles.read(MlflowClient(tracking_uri), EXP).profiles["old"])
    assert (old.startup, old.active, old.tail) == (0.0, 4.0, 0.0)


def slow_starters(uri: str, n: int = 4) -> list[Job]:
    """n jobs of 20 s start-up (imports, data, model), 5 s active phase, 1 s wind-down: 26 s alone."""
    for i in range(n):
        log_profile(uri, EXP, f"s{i}", (40.0, 10.0, 60.0, 4000.0, 300.0, 5.0),
                    whole=(8.0, 2.0, 12.0, 4000.0, 120.0, 26.0), startup_s=20.0)
    return [Job(f"s{i}", f"s{i}") for i in range(n)]


def test_chains_across_two_gpus_beat_one_job_per_gpu_on_jobs_with_long_startups(tracking_uri):
    jobs = slow_starters(tracking_uri)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    plan = Planner(k, PackOptions()).plan(jobs, ["0", "1"])
    assert sorted(len(ds) for ds in plan.gpus.values()) == [1, 1]  # one chain a GPU
    x = model.BOOT
    for d in plan.decisions:
        # the second's 20 s start-up ends as the first's 5 s active phase does, slowed x times beside it
        assert d.mode == "naive" and d.source == "chain" and len(d.jobs) == 2 and d.basis == "start-up"
        assert d.starts == pytest.approx([0.0, 20.0 + 5.0 * x - 20.0])
        assert d.slowdowns == pytest.approx([1.0 + 5.0 * (x - 1) / 26.0, 1.0])
        assert d.makespan_s == pytest.approx(d.starts[1] + 26.0)
        assert d.reason.startswith(f"naive: 2 jobs one after another, 52.0 s alone in all -> {d.makespan_s:.1f} s; ")
        assert d.reason.endswith(f"its start-up beside the job before at {x:.2f} (model); guarded")
    span = plan.predicted_makespan_s()
    assert span == pytest.approx(5.0 * x + 26.0)
    assert plan.one_per_gpu_makespan_s() == pytest.approx(52.0)  # two 26 s jobs one after the other a GPU
    assert ("4 jobs in 2 groups on 2 GPU(s), 4 in chains (2 start-up); predicted makespan (wall) "
            f"{span:.1f} s against 52.0 s one job per GPU at a time (ratio {span / 52.0:.2f})") in explain.totals_line(plan)
    # one GPU: a chain of four; each starts once the one two before it has ended, as the runner starts them
    [d] = Planner(k, PackOptions()).plan(jobs, ["0"]).decisions
    assert d.starts[1] == pytest.approx(5.0 * x)
    for n in (2, 3):
        assert d.starts[n] >= d.starts[n - 2] + d.wall_s(n - 2) - 1e-6
    assert d.makespan_s < 0.7 * 4 * 26.0


def test_one_job_per_gpu_gives_only_alone_decisions(tracking_uri):
    jobs = slow_starters(tracking_uri)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    plan = Planner(k, PackOptions(max_jobs_per_gpu=1)).plan(jobs, ["0", "1"])
    assert len(plan.decisions) == 4
    for d in plan.decisions:
        assert len(d.jobs) == 1 and d.mode == "exclusive" and d.source == "alone" and d.basis == "alone"
        assert d.reason == "alone: one job per GPU (pack.max_jobs_per_gpu: 1)" and d.starts == []
    assert sorted(len(ds) for ds in plan.gpus.values()) == [2, 2]
    assert plan.predicted_makespan_s() == pytest.approx(plan.one_per_gpu_makespan_s()) == pytest.approx(52.0)


def test_memory_that_does_not_fit_beside_the_job_before_makes_a_job_start_after_it(tracking_uri):
    # dlrm 61 000 MiB + dlrm 61 000 MiB > 90 % of 128 000 MiB: the second starts when the first ends
    log_profile(tracking_uri, EXP, "dlrm", (11.2, 22.0, 35.0, 61000.0, 161.5, 30.0),
                whole=(5.0, 10.0, 15.0, 61000.0, 100.0, 50.0), startup_s=18.0)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    opts = PackOptions(gpu_memory_mib=128000.0)
    [d] = Planner(k, opts).plan([Job("d0", "dlrm"), Job("d1", "dlrm")], ["0"]).decisions
    assert d.links[1].basis == "after" and d.starts == pytest.approx([0.0, 50.0])
    assert "d1: after the job before (memory)" in d.reason and d.makespan_s == pytest.approx(100.0)
    opts.memory_headroom_pct = 0  # 122 000 <= 128 000 MiB: its start-up beside the first's active phase
    [d] = Planner(k, opts).plan([Job("d0", "dlrm"), Job("d1", "dlrm")], ["0"]).decisions
    # a light job paced by its kernels' launches (SM 11 %, busy 35 %): no start-up beside its active phase
    # until the pair is measured; the second starts as the first one's active phase ends
    assert model.boot_slowdown(k.profiles["dlrm"], "naive") == model.BOOT_LIGHT > 1.5
    assert d.links[1].basis == "start-up" and d.links[1].boot_s == 0.0 and d.starts == pytest.approx([0.0, 48.0])
    assert "its start-up after the active phase of the job before (its start-up modelled at 3.50 beside it)" in d.reason
    # the store's GPU memory where the spec gives none: the H200's 143 771 MiB holds both
    [d] = Planner(k, PackOptions()).plan([Job("d0", "dlrm"), Job("d1", "dlrm")], ["0"]).decisions
    assert d.links[1].basis == "start-up"


def test_jobs_without_a_profile_run_alone_first(tracking_uri):
    jobs = slow_starters(tracking_uri, 2)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    plan = Planner(k, PackOptions()).plan([jobs[0], Job("new", "never-run"), jobs[1]], ["0", "1"])
    first = plan.decisions[0]
    assert [j.name for j in first.jobs] == ["new"] and first.mode == "exclusive"
    assert first.reason.startswith("no exclusive profile in the store")
    # the two it knows: a GPU each (26 s) is shorter than a chain of the two (31 s)
    assert [[j.name for j in d.jobs] for d in plan.decisions[1:]] == [["s0"], ["s1"]]
    assert plan.decisions[1].reason == "alone: the only job of its GPU"
    assert "makespan not predicted" in explain.totals_line(plan)


def test_a_trial_needs_the_guard_and_the_trials_option(tracking_uri):
    for key in "ab":  # 5 s of start-up, 60 s of active phase: enough budget for a trial after either
        log_profile(tracking_uri, EXP, key, (40.0, 10.0, 90.0, 2000.0, 250.0, 60.0),
                    whole=(20.0, 5.0, 45.0, 2000.0, 150.0, 66.0), startup_s=5.0)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    jobs = [Job("a", "a"), Job("b", "b")]
    [d] = Planner(k, PackOptions()).plan(jobs, ["0"]).decisions
    # the model puts the two beyond the bound side by side: a trial the guard is expected to split
    x = model.slowdowns([k.profiles["a"], k.profiles["b"]], "naive")
    assert d.basis == "trial" and d.links[1].slowdowns == pytest.approx(tuple(x)) and min(x) > 1.5
    assert d.links[1].split and "b: trial, 5.5 s side by side under the guard" in d.reason
    assert d.max_slowdown <= chains.PLAN_SHARE * 1.5 and d.reason.endswith("; guarded")
    for opts in (PackOptions(guard=False), PackOptions(trials=False)):
        [d] = Planner(k, opts).plan(jobs, ["0"]).decisions
        x = d.links[1].boot  # a's active phase x times as long while b starts up beside it
        assert d.basis == "start-up" and d.slowdowns == pytest.approx([1.0 + 5.0 * (1 - 1 / x) / 66.0, 1.0])
    assert not Planner(k, PackOptions(guard=False)).plan(jobs, ["0"]).decisions[0].reason.endswith("guarded")


def test_the_model_figures_a_trial_carries_count_launch_bound_jobs_and_the_hosts_cpus():
    # a matmul of side 1024 (short kernels: SMs mostly idle while the GPU is busy) beside a CNN script
    small_mm = Profile("mm", "r", 6.0, sm_pct=20.0, dram_pct=5.0, busy_pct=60.0, cpu_pct=100.0)
    cnn = Profile("cnn", "r", 6.0, sm_pct=43.0, dram_pct=20.0, busy_pct=90.0)
    r50 = Profile("r50", "r", 3.0, sm_pct=77.0, dram_pct=24.0, busy_pct=100.0)
    assert model.launch_bound(small_mm) and not model.launch_bound(r50)
    mps = model.slowdowns([small_mm, cnn], "mps")
    assert mps[0] == pytest.approx(1 + model.BLOCK_GAIN * 0.43 ** 2 * 0.9) and mps[0] > 2.5
    assert mps[1] == pytest.approx(1 + model.BLOCK_GAIN * 0.2 ** 2 * 0.6) and mps[1] < 1.3
    loader = Profile("ld", "r", 6.0, sm_pct=5.0, dram_pct=2.0, busy_pct=10.0, cpu_pct=600.0)
    assert model.slowdowns([loader, loader], "mps") == pytest.approx([1.05, 1.05])
    assert model.slowdowns([loader, loader], "mps", cpus=8.0) == pytest.approx([1.5, 1.5])  # 12 of 8 CPUs


def recorded_queue(which: str):
    """The 8-job queue's profiles recorded on two H200s (h200x2_queue_profiles.json), as Knowledge."""
    with open(os.path.join(os.path.dirname(__file__), "h200x2_queue_profiles.json")) as f:
        data = json.load(f)
    k = Knowledge(gpu_memory_mib=data["gpu_memory_mib"])
    jobs = []
    known = set(Profile.__dataclass_fields__)  # the recording also holds the GPU's busy spans and traces
    for name, fields in data[which].items():
        p = Profile(**{key: tuple(v) if isinstance(v, list) else v for key, v in fields.items() if key in known})
        k.profiles[p.key] = p
        jobs.append(Job(name, p.key))
    return k, jobs


def test_the_recorded_queue_runs_its_start_ups_beside_each_others_active_phases():
    k, jobs = recorded_queue("alone_step")
    plan = Planner(k, PackOptions()).plan(jobs, ["0", "1"])
    # 8-24 s of start-up, 3-6 s of active phase each: chains of start-ups, no two active phases side by
    # side (none has a budget for a trial); each job starting once the one two before it has ended
    assert plan.one_per_gpu_makespan_s() == pytest.approx(93.7, abs=0.05)
    assert plan.predicted_makespan_s() < 0.7 * plan.one_per_gpu_makespan_s()
    assert sorted(len(ds) for ds in plan.gpus.values()) == [1, 1]
    assert sum(len(d.jobs) for d in plan.decisions) == 8
    for d in plan.decisions:
        assert d.source == "chain" and d.basis == "start-up" and max(d.slowdowns) <= chains.PLAN_SHARE * 1.5
        ph = [chains.phases(j.profile) for j in d.jobs]
        played = chains.ChainPlanner.play(ph, d.starts, d.links)
        for n in range(1, len(d.jobs)):  # each active phase after the one before it
            assert played.active_from[n] >= played.active_to[n - 1] - 1e-6
        for n in range(2, len(d.jobs)):  # never three of a chain's jobs alive at once
            assert played.starts[n] >= played.ends[n - 2] - 1e-6
