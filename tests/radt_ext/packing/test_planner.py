"""The planner on profiles read back from a real SQLite store (store.py): which jobs share a GPU, in
which mode, within the memory and slowdown bounds, and how measured groups change the decisions."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.packing import explain, model, profiles
from radt_ext.packing.options import PackOptions
from radt_ext.packing.planner import Job, Planner
from tests.radt_ext.packing.store import GPU_MIB, H200, IDLE_W, MEASURED, log_group, log_profile

EXP = "queue"


def knowledge(uri, measured=(), **figures):
    for key, figs in figures.items():
        log_profile(uri, EXP, key, figs)
    for mode, a, b in measured:
        sa, sb = MEASURED[(mode, a, b)]
        log_group(uri, EXP, mode, [(a, sa), (b, sb)])
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


def test_small_jobs_share_a_gpu_and_a_heavy_pair_fits_only_under_mps(tracking_uri):
    k = knowledge(tracking_uri, cnn=H200["cnn"], heavy=H200["heavy"])
    jobs = [Job(f"cnn{i}", "cnn") for i in range(4)] + [Job("heavy0", "heavy"), Job("heavy1", "heavy")]
    plan = Planner(k, PackOptions(max_slowdown=1.3, trials=False)).plan(jobs, ["0"])  # the model's plan
    d = by_job(plan)
    # naive: 1 + 0.41 (the other's NVML utilization) > 1.3; mps: 1 + max(SM 17.9 %, DRAM 12 %) = 1.179
    assert d["heavy0"] is d["heavy1"] and d["heavy0"].mode == "mps"
    assert d["heavy0"].slowdowns == pytest.approx([1.179, 1.179])
    assert d["cnn0"].mode == "mps" and d["cnn0"].slowdowns == pytest.approx([1 + 3 * 0.028] * 4)
    assert max(x.max_slowdown for x in plan.decisions) <= 1.3
    assert all(len(x.jobs) > 1 for x in plan.decisions)  # nobody alone: everything fits
    assert "contention model" in d["heavy0"].reason and "peak memory" in d["heavy0"].reason
    # a job's predicted energy: dynamic energy as alone + its share of the idle power over its longer time
    i = d["cnn0"].jobs.index(next(j for j in d["cnn0"].jobs if j.name == "cnn0"))
    s, n = d["cnn0"].slowdowns[i], len(d["cnn0"].jobs)
    assert d["cnn0"].energies[i] == pytest.approx((123.3 - IDLE_W) * 23.0 + IDLE_W * 23.0 * s / n)


def test_the_slowdown_bound_keeps_a_pair_apart_and_says_why(tracking_uri):
    k = knowledge(tracking_uri, heavy=H200["heavy"])
    jobs = [Job("h0", "heavy"), Job("h1", "heavy")]
    plan = Planner(k, PackOptions(max_slowdown=1.1, modes=("naive",), trials=False)).plan(jobs, ["0"])
    assert [len(d.jobs) for d in plan.decisions] == [1, 1]
    assert plan.decisions[1].reason == "alone: with h0: predicted 1.41 > 1.1 (naive, contention model)"
    assert plan.decisions[1].basis_text == "model"
    # with trials (the default) the pair nothing measured is tried under the guard, planned at the bound
    [d] = Planner(k, PackOptions(max_slowdown=1.1, modes=("naive",))).plan(jobs, ["0"]).decisions
    assert d.basis == "trial" and d.slowdowns == [1.1, 1.1] and d.model_slowdowns == pytest.approx([1.41, 1.41])
    assert d.basis_text == "trial (model 1.41)" and "the guard splits it if a job falls beyond the bound" in d.reason


def test_memory_bound_with_headroom(tracking_uri):
    # dlrm 61 000 MiB + dlrm 61 000 MiB > 90 % of 128 000 MiB, though the model predicts 1.35 under MPS
    k = knowledge(tracking_uri, dlrm=H200["dlrm"])
    opts = PackOptions(max_slowdown=2.0, gpu_memory_mib=128000.0)
    plan = Planner(k, opts).plan([Job("d0", "dlrm"), Job("d1", "dlrm")], ["0"])
    assert [len(d.jobs) for d in plan.decisions] == [1, 1]
    assert "peak memory 119.1 GiB > 112.5 GiB (90 % of the GPU)" in plan.decisions[1].reason
    opts.memory_headroom_pct = 0  # 122 000 <= 128 000 MiB: they fit
    plan = Planner(k, opts).plan([Job("d0", "dlrm"), Job("d1", "dlrm")], ["0"])
    assert [len(d.jobs) for d in plan.decisions] == [2]


def test_measured_groups_override_the_model(tracking_uri):
    k = knowledge(tracking_uri, measured=[("naive", "heavy", "heavy"), ("mps", "heavy", "heavy")],
                  heavy=H200["heavy"])
    jobs = [Job("h0", "heavy"), Job("h1", "heavy")]
    assert Planner(k, PackOptions()).predict(jobs, "mps").max_slowdown == pytest.approx(1.57)
    plan = Planner(k, PackOptions(max_slowdown=1.5)).plan(jobs, ["0"])
    assert [len(d.jobs) for d in plan.decisions] == [1, 1]  # the model said 1.18 under MPS; the store says 1.57
    assert "measured together in run" in plan.decisions[1].reason
    assert Planner(k, PackOptions(max_slowdown=1.6)).plan(jobs, ["0"]).decisions[0].mode == "mps"


def test_the_closest_measured_pair_stands_for_an_unmeasured_one(tracking_uri):
    close = tuple(x + 2.0 if i < 3 else x for i, x in enumerate(H200["heavy"]))  # 6 points from heavy
    k = knowledge(tracking_uri, measured=[("mps", "heavy", "heavy")], heavy=H200["heavy"], heavy2=close)
    d = Planner(k, PackOptions()).predict([Job("a", "heavy2"), Job("b", "heavy")], "mps")
    assert sorted(d.slowdowns) == [1.43, 1.57] and d.source.startswith("closest measured pair")
    far = tuple(x * 3 if i < 3 else x for i, x in enumerate(H200["heavy"]))
    k = knowledge(tracking_uri, heavy3=far)
    assert Planner(k, PackOptions()).predict([Job("a", "heavy3"), Job("b", "heavy")], "mps").source == \
        "contention model"


def test_jobs_without_a_profile_run_alone_first(tracking_uri):
    k = knowledge(tracking_uri, cnn=H200["cnn"])
    plan = Planner(k, PackOptions()).plan([Job("c0", "cnn"), Job("new", "never-run"), Job("c1", "cnn")], ["0", "1"])
    first = plan.decisions[0]
    assert [j.name for j in first.jobs] == ["new"] and first.mode == "exclusive"
    assert first.reason.startswith("no exclusive profile in the store")
    assert "makespan not predicted" in explain.totals_line(plan)


def test_two_gpus_take_a_job_each_before_sharing_and_the_plan_predicts_the_makespan(tracking_uri):
    k = knowledge(tracking_uri, cnn=H200["cnn"], heavy=H200["heavy"], dlrm=H200["dlrm"])
    jobs = [Job(f"c{i}", "cnn") for i in range(4)] + [Job("h", "heavy"), Job("d", "dlrm")]
    plan = Planner(k, PackOptions()).plan(jobs, ["0", "1"])
    assert sorted(len(ds) for ds in plan.gpus.values()) == [1, 1]  # two groups, one a GPU
    d = by_job(plan)
    assert d["h"] is not d["d"]  # the two largest took a GPU each; the small ones joined them
    assert all(len(x.jobs) > 1 and x.mode == "mps" and x.max_slowdown <= 1.5 for x in plan.decisions)
    # each small job went where the group's predicted wall time grows least, or where the plan is shortest
    assert "wall time" in d["c0"].reason or "regrouped: predicted makespan" in d["c0"].reason
    assert d["c0"].makespan_s == pytest.approx(max(j.profile.duration_s * s for j, s in
                                                   zip(d["c0"].jobs, d["c0"].slowdowns)))  # no start-up recorded
    packed, alone = plan.predicted_makespan_s(), plan.one_per_gpu_makespan_s()
    assert alone == pytest.approx(max(32.8 + 23.0 * 2, 32.4 + 23.0 * 2))  # longest first, each to the freer GPU
    assert packed < alone
    assert f"ratio {packed / alone:.2f}" in explain.totals_line(plan)


def test_mps_thread_percentages_only_when_the_sms_are_oversubscribed():
    from radt_ext.packing.profiles import Profile

    light = [Profile("a", "r", 10.0, sm_pct=30.0), Profile("b", "r", 10.0, sm_pct=40.0)]
    heavy = [Profile("a", "r", 10.0, sm_pct=80.0), Profile("b", "r", 10.0, sm_pct=40.0)]
    assert model.thread_percentages(light) == [None, None]
    assert model.thread_percentages(heavy) == [70, 35]  # 80/120 and 40/120 of the GPU, 5 % steps up
    assert model.thread_percentages(heavy, "50") == [50, 50]
    assert model.slowdowns(heavy, "mps") == pytest.approx([1.4, 1.8])  # each waits for the other's SMs


# ResNet-18-like: active phase (SM %, DRAM %, util %, peak MiB, W, s) and the whole run around it
R18_ACTIVE, R18_WHOLE = (30.0, 10.0, 40.0, 3000.0, 250.0, 2.0), (5.0, 2.0, 8.0, 3000.0, 120.0, 15.0)


def test_wall_time_is_the_startup_plus_the_active_phase_slowed_and_energy_covers_the_whole_run(tracking_uri):
    # outside the active phase (start-up, wind-down) 15 - 2 = 13 s; the whole run's 1800 J less the
    # active phase's 250 W x 2 s: 100 W outside it
    log_profile(tracking_uri, EXP, "r18", R18_ACTIVE, whole=R18_WHOLE, energy_j=1800.0)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    p = k.profiles["r18"]
    assert (p.duration_s, p.outside_s, p.outside_power_w(), p.alone_energy_j) == \
        pytest.approx((2.0, 13.0, 100.0, 1800.0))
    plan = Planner(k, PackOptions(max_slowdown=2.0)).plan([Job(f"r{i}", "r18") for i in range(3)], ["0"])
    [d] = plan.decisions
    assert d.mode == "mps" and d.slowdowns == pytest.approx([1.6] * 3)  # the bound holds the active phase's
    assert [d.wall_s(i) for i in range(3)] == pytest.approx([13.0 + 2.0 * 1.6] * 3)  # start-ups overlap
    assert plan.predicted_makespan_s() == pytest.approx(16.2)
    assert plan.one_per_gpu_makespan_s() == pytest.approx(3 * 15.0)
    # dynamic energy as alone (active 175 W x 2 s, outside it 25 W x 13 s) + a third of the idle power's
    assert d.energies == pytest.approx([(250 - IDLE_W) * 2 + (100 - IDLE_W) * 13 + IDLE_W * 16.2 / 3] * 3)
    assert "ratio 0.36" in explain.totals_line(plan)
    tags = explain.job_tags(d, 0)
    assert tags["pack.predicted_wall_s"] == "16.20" and tags["pack.predicted_slowdown"] == "1.6000"


def test_a_job_short_beside_its_startup_is_the_cheap_companion(tracking_uri):
    # the same slowdowns with either: the job joins the group whose wall time grows least
    log_profile(tracking_uri, EXP, "long", (40.0, 10.0, 50.0, 3000.0, 250.0, 30.0),
                whole=(38.0, 9.0, 48.0, 3000.0, 240.0, 35.0))
    log_profile(tracking_uri, EXP, "short", (40.0, 10.0, 50.0, 3000.0, 250.0, 2.0), whole=R18_WHOLE)
    log_profile(tracking_uri, EXP, "r18", R18_ACTIVE, whole=R18_WHOLE, startup_s=12.0)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    assert k.profiles["r18"].outside_s == 13.0  # start-up 12 s as logged + 1 s of wind-down
    plan = Planner(k, PackOptions(modes=("mps",))).plan([Job("l", "long"), Job("s", "short"), Job("r", "r18")],
                                                       ["0", "1"])
    d = by_job(plan)
    assert d["r"] is d["s"] and d["l"].jobs == [d["l"].jobs[0]]
    assert d["s"].slowdowns == pytest.approx([1.3, 1.4])  # beside the long job: the same 1.3 and 1.4
    assert "wall time 15.0 -> 15.8 s, r alone 15.0 s" in d["s"].reason  # beside the long one: 35 -> 44 s


# A matmul-like load (SM 95 %, DRAM 40 %) whose active phase is seconds 8-14 of a 15 s run, and a
# recommender whose GPU work waits for 20 s of start-up: alone, each would slow the other about 2x
FAST = dict(figures=(95.0, 40.0, 98.0, 4000.0, 600.0, 6.0), whole=(40.0, 17.0, 42.0, 4000.0, 300.0, 15.0),
            startup_s=8.0, busy=(7.5, 14.2))
LATE = dict(figures=(60.0, 70.0, 90.0, 30000.0, 400.0, 4.0), whole=(10.0, 12.0, 15.0, 30000.0, 150.0, 36.0),
            startup_s=24.0, busy=(20.0, 34.0))


def test_a_profile_says_where_the_job_used_the_gpu_from_its_own_start(tracking_uri):
    log_profile(tracking_uri, EXP, "late", child_later_s=0.5, **LATE)
    p = profiles.read(MlflowClient(tracking_uri), EXP).profiles["late"]
    assert (p.busy_from_s, p.busy_until_s) == pytest.approx((19.5, 33.5))  # the parent's span, from the child's start
    assert p.active_window() == (24.0, 28.0) and p.active_window(1.5) == (24.0, 30.0)
    assert p.busy_window(1.5) == pytest.approx((19.5, 35.5))  # what comes after the active phase comes later
    log_profile(tracking_uri, EXP, "old", (60.0, 70.0, 90.0, 30000.0, 400.0, 4.0))  # no span: the whole run
    old = profiles.read(MlflowClient(tracking_uri), EXP).profiles["old"]
    assert old.busy_window() == (0.0, 4.0) and old.active_window() == (0.0, 4.0)


def test_jobs_whose_gpu_work_does_not_meet_share_a_gpu_the_contention_model_alone_would_refuse(tracking_uri):
    log_profile(tracking_uri, EXP, "fast", **FAST)
    log_profile(tracking_uri, EXP, "late", **LATE)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    full = model.slowdowns([k.profiles["fast"], k.profiles["late"]], "mps")
    assert min(full) > 1.5  # as if their active phases met
    plan = Planner(k, PackOptions(max_slowdown=1.5)).plan([Job("f", "fast"), Job("l", "late")], ["0"])
    [d] = plan.decisions
    assert d.slowdowns == [1.0, 1.0] and d.overlaps == [0.0, 0.0]  # the late one's span starts 6 s after
    assert d.mode == "naive" and d.makespan_s == pytest.approx(36.0)  # no daemon needed; 36 s instead of 51
    assert "active phases 0-0 % beside another job's GPU use" in d.reason
    assert explain.job_tags(d, 0)["pack.predicted_overlap_pct"] == "0"


def test_the_slowdown_is_weighed_over_the_pieces_of_the_active_phase_beside_each_state(tracking_uri):
    log_profile(tracking_uri, EXP, "fast", **FAST)
    log_profile(tracking_uri, EXP, "early", **{**LATE, "startup_s": 12.0, "busy": (10.0, 20.0)})
    log_profile(tracking_uri, EXP, "later", **{**LATE, "startup_s": 20.0, "busy": (14.0, 30.0)})
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    fast, early, later = k.profiles["fast"], k.profiles["early"], k.profiles["later"]
    # outside its active phase the early job's GPU was busy (util) (15 % x 36 s - 90 % x 4 s) / (10 s - 4 s)
    assert early.outside_figures[2] == pytest.approx(30.0)
    # the load's active phase [8, 14]: the early job busy outside its active phase until 12 - 3 s (its span
    # widened by 2 s + 10 % of its busy start), then active: naive 1 + 0.30 for 1 s, 1 + 0.90 for 5 s
    s0, f0, meets, _ = model._beside(0, [fast, early], [1.0, 1.0], "naive")
    assert (s0, f0, meets) == (pytest.approx(1 + (0.30 * 1 + 0.90 * 5) / 6), 1.0, [1])
    # the early job's active phase [12, 16] lies in the load's widened active phase [5.25, 16.75]
    assert model._beside(1, [fast, early], [1.0, 1.0], "naive")[:3] == (pytest.approx(1.98), 1.0, [0])
    line = model.timeline([fast, early], "naive")
    assert line.slowdowns[0] > s0  # stretched, the load's active phase meets more of the other's
    # the later job's span starts at 14 - 3.4 s: 3.4 s of the load's 6 s active phase beside it, busy
    # outside its active phase at (540 - 360) / (16 - 4) = 15 %
    s2, f2, _, _ = model._beside(0, [fast, later], [1.0, 1.0], "naive")
    assert f2 == pytest.approx(3.4 / 6) and s2 == pytest.approx(1 + 0.15 * 3.4 / 6)


def test_thread_percentages_count_the_sms_busy_during_each_jobs_active_phase(tracking_uri):
    from radt_ext.packing.profiles import Profile

    heavy = [Profile("a", "r", 10.0, sm_pct=80.0), Profile("b", "r", 10.0, sm_pct=40.0),
             Profile("c", "r", 10.0, sm_pct=90.0)]
    assert model.thread_percentages(heavy, "auto", [1.2, 1.2, 0.9]) == [70, 35, None]
    # beside the recommender's warm-up, not its active phase, the load keeps every SM
    log_profile(tracking_uri, EXP, "fast", **FAST)
    log_profile(tracking_uri, EXP, "early", **{**LATE, "startup_s": 12.0, "busy": (4.0, 20.0)})
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    fast, early = k.profiles["fast"], k.profiles["early"]
    early.startup_s = 30.0  # its active phase long after the load's
    line = model.timeline([fast, early], "mps")
    assert early.outside().sm_pct == pytest.approx(10.0)  # (10 % x 36 s - 60 % x 4 s) / (16 s - 4 s): busy, not active
    assert line.meets[0] == [1] and line.sm_demand[0] == pytest.approx(0.95)
    assert model.thread_percentages([fast, early], "auto", line.sm_demand) == [None, None]
    assert model.thread_percentages([fast, early], "auto") == [65, 40]  # as if both active phases met


def test_beside_a_job_outside_its_active_phase_counts_the_busiest_its_gpu_was_within_the_margin():
    from radt_ext.packing.profiles import Profile

    # its exclusive run: the GPU idle but for 90 % utilization at seconds 9-10 (a warm-up epoch);
    # 45 % on average outside its active phase [20, 24], with SM 30 % and DRAM 35 %
    trace = tuple(90.0 if 18 <= b < 20 else 0.0 for b in range(60))  # 0.5 s bins
    late = Profile("late", "r", 4.0, sm_pct=60.0, dram_pct=70.0, busy_pct=90.0, phase="active phase",
                   startup_s=20.0, e2e_duration_s=30.0, outside_s=26.0, busy_from_s=9.0, busy_until_s=25.0,
                   outside_figures=(30.0, 35.0, 45.0), busy_trace=trace)
    assert late.outside_at(5.0, 2.0) is None  # idle then, 2 s either side included
    there = late.outside_at(8.0, 2.0)  # the epoch at 9-10 s lies within 2 s
    assert (there.busy_pct, there.sm_pct, there.dram_pct) == (90.0, 60.0, 70.0)  # SM, DRAM scaled by 90/45
    fast = Profile("fast", "r", 6.0, sm_pct=95.0, dram_pct=40.0, busy_pct=98.0, phase="active phase",
                   startup_s=8.0, e2e_duration_s=15.0, outside_s=9.0, busy_from_s=7.5, busy_until_s=14.2)
    # the load's active phase [8, 14] against the epoch seen from 2 + 0.9 s away (the late job's margin):
    # naive 1 + 0.9 from 8 to 13 s (the pieces' middles within reach of the epoch), then alone
    s, f, meets, _ = model._beside(0, [fast, late], [1.0, 1.0], "naive")
    assert (s, f, meets) == (pytest.approx(1 + 0.9 * 5 / 6), pytest.approx(5 / 6), [1])


def recorded_queue(which: str):
    """The 8-job queue's profiles recorded on two H200s (h200x2_queue_profiles.json), as Knowledge."""
    import json
    import os

    from radt_ext.packing.profiles import Knowledge, Profile

    with open(os.path.join(os.path.dirname(__file__), "h200x2_queue_profiles.json")) as f:
        data = json.load(f)
    k = Knowledge(gpu_memory_mib=data["gpu_memory_mib"])
    jobs = []
    for name, fields in data[which].items():
        p = Profile(**{key: tuple(v) if isinstance(v, list) else v for key, v in fields.items()})
        k.profiles[p.key] = p
        jobs.append(Job(name, p.key))
    return k, jobs


def test_the_recorded_queue_is_planned_as_it_ran_on_the_gpus():
    k, jobs = recorded_queue("alone_step")
    plan = Planner(k, PackOptions(trials=False)).plan(jobs, ["0", "1"])  # the model's plan, as the proof ran
    d = by_job(plan)
    # the plan the 2-GPU proof ran (docs/validation/pack_queue/plan.txt): 58.4 s against 93.7 s
    assert plan.predicted_makespan_s() == pytest.approx(58.4, abs=0.05)
    assert plan.one_per_gpu_makespan_s() == pytest.approx(93.7, abs=0.05)
    assert d["resnet18-1"] is d["resnet18-3"] is d["resnet18-5"] and d["resnet18-1"].mode == "mps"
    # the recommender's GPU work comes 20 s after a ResNet-50's: they share, no thread limit needed
    assert d["dlrm-11"] is d["resnet50-9"] and d["dlrm-11"].thread_pcts == [None, None]
    assert d["dlrm-11"].slowdowns[d["dlrm-11"].jobs.index(next(j for j in d["dlrm-11"].jobs if j.name == "dlrm-11"))] == 1.0
    assert len(d["matmul-13"].jobs) == len(d["matmul-15"].jobs) == 1  # a load beside either CNN: ~1.9
    assert max(x.max_slowdown for x in plan.decisions) <= 1.5
    # the same profiles without their timing: every active phase meets every other, and less fits
    for p in k.profiles.values():
        p.busy_from_s = p.busy_until_s = p.busy_trace = p.outside_figures = None
        p.startup_s, p.phase = None, "whole run"
    untimed = Planner(k, PackOptions(trials=False)).plan(jobs, ["0", "1"])
    assert untimed.predicted_makespan_s() > plan.predicted_makespan_s() + 5


def test_moving_jobs_between_groups_undoes_a_greedy_choice(monkeypatch):
    # the newest profiles: greedy puts two ResNet-18s beside the two loads; the trio together is shorter
    # (without the launch-bound term: with it, a ResNet-18 beside a load is predicted far above the bound)
    monkeypatch.setattr(model, "BLOCK_GAIN", 0.0)
    k, jobs = recorded_queue("newest")
    regroup = Planner._regroup
    monkeypatch.setattr(Planner, "_regroup", lambda self, groups, gpus: groups)
    greedy = Planner(k, PackOptions(trials=False)).plan(jobs, ["0", "1"])
    monkeypatch.setattr(Planner, "_regroup", regroup)
    plan = Planner(k, PackOptions(trials=False)).plan(jobs, ["0", "1"])
    d = by_job(plan)
    assert by_job(greedy)["resnet18-1"] is not by_job(greedy)["resnet18-5"]
    assert plan.predicted_makespan_s() < greedy.predicted_makespan_s() - 5
    assert d["resnet18-1"] is d["resnet18-3"] is d["resnet18-5"]
    assert max(x.max_slowdown for x in plan.decisions) <= 1.5
    assert any("regrouped: predicted makespan" in x.reason for x in plan.decisions)
    assert any("moved out" in x.reason for x in plan.decisions)


def test_a_launch_bound_job_is_predicted_to_wait_for_a_neighbour_that_holds_the_sms():
    from radt_ext.packing.profiles import Profile

    # a matmul of side 1024 (short kernels: SMs mostly idle while the GPU is busy) beside a CNN script
    small_mm = Profile("mm", "r", 6.0, sm_pct=20.0, dram_pct=5.0, busy_pct=60.0, cpu_pct=100.0)
    cnn = Profile("cnn", "r", 6.0, sm_pct=43.0, dram_pct=20.0, busy_pct=90.0)
    r18 = Profile("r18", "r", 4.0, sm_pct=14.0, dram_pct=2.8, busy_pct=35.0, cpu_pct=100.0)
    r50 = Profile("r50", "r", 3.0, sm_pct=77.0, dram_pct=24.0, busy_pct=100.0)
    assert model.launch_bound(small_mm) and model.launch_bound(r18) and not model.launch_bound(r50)
    mps = model.slowdowns([small_mm, cnn], "mps")
    assert mps[0] == pytest.approx(1 + model.BLOCK_GAIN * 0.43 ** 2 * 0.9) and mps[0] > 2.5  # was 1.43
    assert mps[1] == pytest.approx(1 + model.BLOCK_GAIN * 0.2 ** 2 * 0.6) and mps[1] < 1.3  # small kernels: little wait
    assert model.slowdowns([small_mm, cnn], "naive")[0] > 2.5
    # three ResNet-18 (their kernels leave most SMs free): as before, within 1.27
    assert max(model.slowdowns([r18, r18, r18], "mps")) <= 1.28
    k = profiles.Knowledge(profiles={p.key: p for p in (small_mm, cnn)})
    plan = Planner(k, PackOptions()).plan([Job("mm", "mm"), Job("cnn", "cnn")], ["0"])
    assert [len(d.jobs) for d in plan.decisions] == [1, 1]
    # (the CNN ends first and the matmul finishes alone: over its whole active phase about 2.3)
    assert plan.decisions[1].reason.startswith("alone: with cnn: predicted 2.") and "> 1.5" in plan.decisions[1].reason


def test_jobs_heavy_on_the_hosts_cpus_are_slowed_by_their_share_of_them():
    from radt_ext.packing.profiles import Profile

    loader = Profile("ld", "r", 6.0, sm_pct=5.0, dram_pct=2.0, busy_pct=10.0, cpu_pct=600.0)
    assert model.slowdowns([loader, loader], "mps") == pytest.approx([1.05, 1.05])
    assert model.slowdowns([loader, loader], "mps", cpus=8.0) == pytest.approx([1.5, 1.5])  # 12 of 8 CPUs
    assert model.slowdowns([loader, loader], "mps", cpus=32.0) == pytest.approx([1.05, 1.05])


def test_a_job_the_guard_cannot_watch_shares_only_where_a_measured_group_says_so(tracking_uri):
    log_profile(tracking_uri, EXP, "seen", H200["cnn"])
    log_profile(tracking_uri, EXP, "silent", H200["cnn"], throughput=None)
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    assert k.profiles["silent"].throughput is None and k.profiles["seen"].throughput == 1000.0
    jobs = [Job("a", "seen"), Job("b", "silent")]
    plan = Planner(k, PackOptions()).plan(jobs, ["0"])
    assert [len(d.jobs) for d in plan.decisions] == [1, 1]
    assert "b reports no progress, so the guard cannot watch it" in plan.decisions[1].reason
    assert plan.decisions[1].basis == "alone"  # no trial either: the guard could not split it
    assert [len(d.jobs) for d in Planner(k, PackOptions(guard=False)).plan(jobs, ["0"]).decisions] == [2]
    log_group(tracking_uri, EXP, "naive", [("seen", 1.02), ("silent", 1.04)])
    k = profiles.read(MlflowClient(tracking_uri), EXP)
    d = Planner(k, PackOptions()).plan(jobs, ["0"]).decisions
    assert [len(x.jobs) for x in d] == [2] and "measured together" in d[0].reason and "guarded" in d[0].reason


def test_a_group_the_guard_split_counts_at_the_slowdown_it_read_live(tracking_uri):
    from mlflow.entities import Metric

    log_profile(tracking_uri, EXP, "a", H200["cnn"])
    log_profile(tracking_uri, EXP, "b", H200["cnn"])
    parent = log_group(tracking_uri, EXP, "mps", [("a", 1.2), ("b", 1.1)])
    client = MlflowClient(tracking_uri)
    kids = client.search_runs([client.get_experiment_by_name(EXP).experiment_id],
                              f"tags.`mlflow.parentRunId` = '{parent}'")
    a = next(r for r in kids if r.data.tags["sweep.workload_hash"] == "a")
    client.log_batch(a.info.run_id, metrics=[Metric("summary/guard_live_slowdown_max", 2.4, 0, 0)])
    client.log_batch(parent, metrics=[Metric("summary/guard_paused_s", 3.0, 0, 0)])
    g = profiles.read(client, EXP).groups[0]
    assert g.guarded and g.slowdowns == {"a": [2.4], "b": [1.1]}
    plan = Planner(profiles.read(client, EXP), PackOptions(modes=("mps",))).plan([Job("a", "a"), Job("b", "b")], ["0"])
    assert [len(d.jobs) for d in plan.decisions] == [1, 1]
    assert "predicted 2.40 > 1.5 (mps, measured together in run" in plan.decisions[1].reason
