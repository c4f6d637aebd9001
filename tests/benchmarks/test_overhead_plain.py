"""The plain-run overhead benchmark's plumbing (benchmarks/sampling/overhead_plain.py) on the CPU versions of
the unmodified scripts and the NVML replay: every configuration of every round stamped, the own compute time
read from the script's own last line, the alone pass and the summary's shape. No timing is asserted."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

TRACE = os.path.join(REPO, "listeners", "traces", "h200_matmul.json")
pytestmark = pytest.mark.slow


def bench(what: str, out, uri: str, *args: str) -> None:
    env = dict(os.environ, RADT_EXT_NVML_REPLAY=TRACE, MLFLOW_TRACKING_URI=uri,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.sampling.overhead_plain", what, "--out", str(out), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_each_job_is_stamped_in_every_configuration_and_summarised(tmp_path, tracking_uri):
    out = tmp_path / "res"
    bench("jobs", out, tracking_uri, "--dry", "--kinds", "decoder", "--configs", "plain,run,top:0.5",
          "--repeats", "1")
    bench("alone", out, tracking_uri, "--dry", "--kinds", "decoder,gemm", "--repeats", "1")
    bench("analyse", out, tracking_uri, "--summary", str(tmp_path / "summary.json"), "--card", "cpu")
    jobs = [json.loads(line) for line in (out / "jobs.jsonl").read_text().splitlines()]
    assert sorted(j["config"] for j in jobs) == ["plain", "run", "top:0.5"]
    for j in jobs:  # the script's own line read back; radt-ext's time around it measured
        assert j["rc"] == 0 and j["own_s"] > 0 and j["job_wall_s"] <= j["wall_s"] and j["before_s"] >= 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["card"] == "cpu" and summary["kinds"]["decoder"]["bound"] == "launch"
    assert len(summary["kinds"]["decoder"]["plain_s"]) == 1 and len(summary["kinds"]["decoder"]["run_s"]) == 1
    assert "wall_extra_s" in summary["kinds"]["decoder"] and "decoder" in summary["listeners"]["top:0.5"]
    alone = summary["alone_pass"]
    assert alone["plain_makespan_s"] > 0 and alone["radt_makespan_s"] > 0
    assert sorted(j["job"] for j in alone["jobs"]) == ["decoder", "gemm"]
    one, = alone["passes"]  # the sweep's makespan against the plain pass of its round, and each one's own time
    assert abs(one["ratio"] - one["radt_makespan_s"] / one["plain_makespan_s"]) < 1e-3
    assert one["radt_own_s"] > 0 and one["plain_own_s"] > 0
    steps = json.loads((out / "logs" / "alone-sweep-0.timings.json").read_text())  # the sweep's RADT_EXT_TIMINGS
    assert steps["head"]["mlflow_loaded"] is False and len(steps["groups"]) == 2  # its first job before MLflow
    from benchmarks.sampling import sweep_steps

    row = sweep_steps.alone(out)[-2]  # the pass's first job after the plan, its one gap, its exit after the last
    first, gaps, exit_s = (float(x) for x in row.strip("| ").split(" | ")[1:])
    assert first > 0 and gaps > 0 and exit_s > 0


def test_a_configuration_list_without_plain_is_refused(tmp_path, tracking_uri):
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.sampling.overhead_plain", "jobs", "--out",
                           str(tmp_path), "--configs", "run"], cwd=REPO, env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "must hold plain" in proc.stderr


def test_the_pack_proofs_alone_pass_counting_off_and_listeners_from_another_call(tmp_path, tracking_uri):
    out, other = tmp_path / "res", tmp_path / "other"
    bench("jobs", out, tracking_uri, "--dry", "--kinds", "kv", "--configs", "plain,sweep-pack+np", "--repeats", "1")
    spec = (out / "specs" / "kv-sweep-pack_np-0.yaml").read_text()
    assert "schedule: pack" in spec and "max_jobs_per_gpu: 1" in spec and "child_listeners: top:0.5,gpu_procs:0.2" in spec
    jobs = [json.loads(line) for line in (out / "jobs.jsonl").read_text().splitlines()]
    assert sorted(j["config"] for j in jobs) == ["plain", "sweep-pack+np"] and all(j["rc"] == 0 for j in jobs)
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri)
    exps = [e.experiment_id for e in client.search_experiments()]
    notes = [r.data.tags.get("radt_ext.progress_note", "") for r in client.search_runs(exps)
             if r.data.tags.get("pack.job")]
    assert notes and all("progress counting is off" in n for n in notes)  # +np: counting off in the sweep's job
    bench("jobs", other, tracking_uri, "--dry", "--kinds", "kv", "--configs", "plain,top:0.5", "--repeats", "1")
    bench("analyse", out, tracking_uri, "--listeners-from", str(other), "--summary", str(tmp_path / "s.json"),
          "--card", "cpu")
    summary = json.loads((tmp_path / "s.json").read_text())
    assert len(summary["kinds"]["kv"]["plain_s"]) == 1  # this call's plain runs only
    assert "kv" in summary["listeners"]["top:0.5"] and "sweep-pack+np" not in summary["listeners"]


def _jobs(folder, kinds, own):
    folder.mkdir(parents=True)
    with open(folder / "jobs.jsonl", "w") as fh:
        for kind in kinds:
            for config in ("plain", "run"):
                fh.write(json.dumps({"kind": kind, "config": config, "round": 0, "rc": 0, "own_s": own, "wall_s": own + 1,
                                     "job_wall_s": own + 0.5, "before_s": 0.1, "after_s": 0.1}) + "\n")


def test_another_calls_folder_gives_only_the_kinds_named_after_it(tmp_path):
    """`--also FOLDER:KIND,...`: a call's results, those kinds only (the others come from the calls that ran
    them on the code being summarised)."""
    out, old = tmp_path / "new", tmp_path / "old"
    _jobs(out, ["decoder"], 5.0)
    _jobs(old, ["decoder", "gemm"], 3.0)
    from benchmarks.sampling import overhead_plain

    overhead_plain.main(["analyse", "--out", str(out), "--also", f"{old}:gemm", "--card", "cpu",
                         "--summary", str(tmp_path / "s.json")])
    kinds = json.loads((tmp_path / "s.json").read_text())["kinds"]
    assert kinds["decoder"]["plain_s"] == [5.0] and kinds["decoder"]["run_s"] == [5.0]  # not the old call's 3.0
    assert kinds["gemm"]["plain_s"] == [3.0]


def _alone(folder, devices, plain, sweep):
    """An alone.json of one round: each job's wall plain and in the sweep's pass."""
    (folder / "alone.json").write_text(json.dumps({"devices": devices, "amounts": {k: 1 for k in plain}, "passes": [
        {"how": how, "round": 0, "makespan_s": sum(walls.values()) / len(devices) + 0.2,
         "jobs": {k: {"job_wall_s": w} for k, w in walls.items()}}
        for how, walls in (("plain", plain), ("sweep", sweep))]}))


def test_alone_passes_of_one_and_two_gpus_are_told_apart(tmp_path):
    """`--alone`: each pass named by its folder under --out, with its GPUs; the launcher's own time only where one
    lane ran every job (two lanes: which job ran where in the sweep is not known); every job judged."""
    out = tmp_path / "res"
    _jobs(out, ["decoder"], 5.0)
    one, two = out / "one_gpu" / "alone", out / "two_gpu" / "alone"
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    _alone(one, ["0"], {"decoder": 10.0, "gru": 12.0}, {"decoder": 10.2, "gru": 12.1})
    _alone(two, ["0", "1"], {"decoder": 10.0, "gru": 12.0, "kv": 8.0}, {"decoder": 11.2, "gru": 12.0, "kv": 8.0})
    from benchmarks.sampling import overhead_plain

    overhead_plain.main(["analyse", "--out", str(out), "--alone", str(one), "--alone", str(two), "--card", "cpu",
                         "--summary", str(tmp_path / "s.json")])
    alone = json.loads((tmp_path / "s.json").read_text())["alone_pass"]
    assert alone["devices"] == ["0", "1"]
    first, second = alone["passes"]
    assert (first["folder"], first["devices"], second["folder"], second["devices"]) == \
        ("one_gpu/alone", ["0"], "two_gpu/alone", ["0", "1"])
    assert first["radt_own_s"] == pytest.approx(0.2) and second["radt_own_s"] is None
    judged = {(j["folder"], j["job"]): j["within"] for j in alone["jobs"]}
    assert len(judged) == 5 and judged[("two_gpu/alone", "decoder")] is False  # 11.2 > 1.05 x 10.0 + 0.5
    assert judged[("two_gpu/alone", "kv")] and judged[("one_gpu/alone", "gru")]
    assert "| two_gpu/alone 0 | sweep |" in (out / "overhead_plain.md").read_text()


def _pairs(folder, rows):
    folder.mkdir(parents=True)
    with open(folder / "pairs.jsonl", "w") as fh:
        for r, (plain, radt) in enumerate(rows):
            fh.write(json.dumps({"kind": "gru", "config": "sweep", "round": r, "amount": 1,
                                 "plain": {"rc": 0, "own_s": plain, "job_wall_s": plain + 2, "before_s": 0.06,
                                           "after_s": 0.01, "gpu": "0"},
                                 "radt": {"rc": 0, "own_s": radt, "job_wall_s": radt + 2, "before_s": 0.26,
                                          "after_s": 0.31, "gpu": "1"}}) + "\n")


def test_side_by_side_pairs_give_each_pairs_cost_with_its_interval(tmp_path):
    """benchmarks/sampling/side_by_side.py: each pair's cost against its own plain twin, the mean's 95 %
    t-interval over the pairs, radt-ext's own time beyond plain's; a failed job's pair left out."""
    from benchmarks.sampling import side_by_side

    _pairs(tmp_path / "a", [(10.0, 10.2), (8.0, 8.0)])
    _pairs(tmp_path / "b", [(9.0, 9.0), (10.0, 0.0)])  # the last: no own time read, left out
    s = side_by_side.summarise([tmp_path / "a", tmp_path / "b"])["gru"]["sweep"]
    assert s["pairs"] == 3 and s["bound"] == "host"
    assert s["own_cost_pct"] == pytest.approx(2.0 / 3) and s["own_cost_median_pct"] == pytest.approx(0.0)
    lo, hi = s["own_cost_ci95"]
    assert lo < 0 < s["own_cost_pct"] < hi  # 4.30 x the spread's standard error either side
    assert hi - s["own_cost_pct"] == pytest.approx(4.303 * (4 / 3) ** 0.5 / 3 ** 0.5, rel=1e-3)
    assert s["extra_s"] == [0.5, 0.5, 0.5]


def test_side_by_side_runs_each_pair_together_on_the_cpu(tmp_path, tracking_uri):
    """The pairs' plumbing on the CPU versions of the scripts: both jobs of a pair stamped, started together."""
    out = tmp_path / "res"
    env = dict(os.environ, RADT_EXT_NVML_REPLAY=TRACE, MLFLOW_TRACKING_URI=tracking_uri,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.sampling.side_by_side", "pairs", "--out", str(out),
                           "--dry", "--gpus", "cpu,cpu", "--kinds", "gemm", "--configs", "sweep", "--repeats", "1"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pair, = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    plain, radt = pair["plain"], pair["radt"]
    assert plain["rc"] == 0 and radt["rc"] == 0 and plain["own_s"] > 0 and radt["own_s"] > 0
    assert abs(plain["launched"] - radt["launched"]) < 1.0  # started together
    assert radt["job_started"] < plain["job_ended"] and plain["job_started"] < radt["job_ended"]  # side by side


@pytest.mark.skipif(not shutil.which("taskset") or len(os.sched_getaffinity(0)) < 2, reason="needs taskset, 2 CPUs")
def test_pinned_jobs_run_on_the_cpus_asked_in_every_configuration(tmp_path, tracking_uri):
    from mlflow.tracking import MlflowClient

    out = tmp_path / "res"
    cpu = str(min(os.sched_getaffinity(0)))
    several = "top:0.5/gpu_procs:0.2"  # a configuration of several listeners (the defaults less one, say)
    bench("jobs", out, tracking_uri, "--dry", "--kinds", "gemm", "--configs", f"plain,run,{several}", "--repeats",
          "1", "--pin", cpu)
    jobs = [json.loads(line) for line in (out / "jobs.jsonl").read_text().splitlines()]
    assert sorted(j["config"] for j in jobs) == ["plain", "run", several]
    assert all(j["rc"] == 0 and j["own_s"] > 0 and j["pin"] == cpu for j in jobs)
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    commands = [r.data.tags["radt_ext.command"] for r in runs if "radt_ext.command" in r.data.tags]
    assert len(commands) == 2 and all(f"taskset -c {cpu} " in c for c in commands)  # the job itself, radt-ext not
    listened = {r.data.tags["radt_ext.listeners"] for r in runs if "radt_ext.command" in r.data.tags}
    assert "top:0.5,gpu_procs:0.2" in listened  # the several listeners asked for, and only those


def test_a_one_job_sweeps_own_time_is_split_at_its_steps(tmp_path, tracking_uri):
    from benchmarks.sampling import sweep_steps

    out = tmp_path / "res"
    bench("jobs", out, tracking_uri, "--dry", "--kinds", "gemm", "--configs", "plain,sweep", "--repeats", "1")
    lines = sweep_steps.one_job(out)
    row = next(line for line in lines if line.startswith("| gemm 0 |"))
    plan, process, first, free, group, ended, exited = (float(x) for x in row.strip("| ").split(" | ")[1:])
    # in the order they happen; its process's time is taken when Popen returns, which on a loaded host can be
    # after the job's first line
    assert 0 < plan <= process and plan < first and 0 <= free <= group <= ended <= exited


def test_the_welch_interval_takes_student_t_at_its_own_degrees_of_freedom():
    import math
    import statistics

    from benchmarks.sampling.overhead_plain import interval

    mine, plain = [10.0, 11.0, 12.0], [9.0, 10.0, 11.0]  # equal variances, 3 and 3: Welch's df is 4
    cost, low, high = interval(mine, plain)
    se = math.sqrt(statistics.variance(mine) / 3 + statistics.variance(plain) / 3) / 10.0 * 100
    assert cost == pytest.approx(10.0) and (high - cost) == pytest.approx(2.7764451 * se, rel=1e-6)
    assert interval([1.0], [2.0, 3.0])[1] != interval([1.0], [2.0, 3.0])[1]  # one run: no interval (nan)


def test_an_alone_pass_on_two_gpus_has_its_gaps_within_each_lane():
    from benchmarks.sampling import sweep_steps

    def job(start, end, **kw):
        return {"job_started": start, "job_ended": end, **kw}

    # a pool: each job goes to the GPU freed last before it started (no device stamped)
    pooled = [job(0.0, 10.0), job(0.5, 6.0), job(6.1, 12.0), job(10.2, 15.0)]
    assert sweep_steps._lanes(pooled) == [[pooled[0], pooled[3]], [pooled[1], pooled[2]]]
    # plain lanes stamp their device
    fixed = [job(0.0, 5.0, device="0"), job(0.0, 3.0, device="1"), job(3.1, 4.0, device="1"),
             job(5.1, 6.0, device="0")]
    assert sweep_steps._lanes(fixed) == [[fixed[0], fixed[3]], [fixed[1], fixed[2]]]
