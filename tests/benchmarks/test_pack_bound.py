"""The packing bound's proof (benchmarks/packing/pack_bound.py, plain.py and pack_bound.sh): queue B and the
long queue, each step's spec, the lived slowdown computed from a store made here through MLflow's client,
against the alone pass and against the queue run plain, the summary of the queues, and (slow) the driver's
dry flow on three jobs of the long queue, a step or two a call. No timing is asserted."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml
from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from benchmarks.packing import pack_bound as pb
from benchmarks.packing import plain
from tests.conftest import REPO

QUEUES = {"unmodified": os.path.join(REPO, "examples", "unmodified", "queue.yaml"),
          "b": os.path.join(REPO, "examples", "pack_bound", "queue.yaml"),
          "long": os.path.join(REPO, "examples", "pack_plain", "queue_long.yaml")}
PASS_KEYS = {"jobs", "kinds", "instrumented_jobs", "makespan_ratio", "makespan_plain_ratio", "max_job_slowdown",
             "max_job", "max_job_slowdown_plain", "max_job_plain", "max_reported_gap", "energy_ratio", "plan_error",
             "cored_s", "makespan_s"}
ROW_KEYS = {"name", "kind", "alone_wall_s", "packed_wall_s", "plain_wall_s", "lived", "lived_plain", "reported",
            "paused_s"}
# the shape of a queue in summary.json: its own figures and a pass each
SUMMARY_PASS_KEYS = {"jobs", "instrumented_jobs", "makespan_s", "max_job_slowdown", "max_job_slowdown_plain", "max_job",
                     "plan_error", "cored_s"}


def test_queue_b_is_users_scripts_of_kinds_the_unmodified_queue_lacks(tmp_path):
    from radt_ext.packing.queue import job_variants
    from radt_ext.sweep.spec import load

    jobs, theirs = pb.queue(QUEUES["b"]), pb.queue(QUEUES["unmodified"])
    new_kinds = {j["kind"] for j in jobs.values()} - {j["kind"] for j in theirs.values()}
    assert len(jobs) >= 8 and len(new_kinds) >= 4 and {"timed", "startup", "epochs"} <= new_kinds
    assert not {j["script"] for j in jobs.values()} & set(os.listdir(os.path.dirname(QUEUES["unmodified"])))
    assert pb.instrumented(jobs, os.path.dirname(QUEUES["b"])) == []
    assert pb.instrumented(theirs, os.path.dirname(QUEUES["unmodified"])) == []
    (tmp_path / "mine.py").write_text("import torch\nfrom radt_ext import log_progress\n")
    (tmp_path / "theirs.py").write_text("import os, radt_ext.workload_api\n")
    (tmp_path / "clean.py").write_text("import os  # radt_ext is not imported here\n")
    found = pb.instrumented({n: {"script": f"{n}.py"} for n in ("mine", "theirs", "clean")}, str(tmp_path))
    assert found == ["mine", "theirs"]
    assert pb.default_name(QUEUES["b"]) == "b" and pb.default_name(QUEUES["unmodified"]) == "unmodified"
    for step, (per_gpu, repeats, trials) in pb.STEPS.items():
        path = tmp_path / f"{step}.yaml"
        path.write_text(pb.spec(step, True, "naive,mps", 1.5, QUEUES["b"], pb.experiment("b")))
        sweep = load(str(path))
        assert sweep.name == "pack-bound-b" and sweep.repeats == repeats
        assert (sweep.pack.max_jobs_per_gpu, sweep.pack.trials) == (per_gpu, trials)
        assert len(job_variants(sweep)) == len(jobs) * repeats
        # PAIRS_FROM: the packed steps know a pair sweep's pairs; the alone step packs nothing
        path.write_text(pb.spec(step, True, "naive,mps", 1.5, QUEUES["b"], pb.experiment("b"),
                                pairs_from=("pack-pairs-b",)))
        assert load(str(path)).pack.pairs_from == (("pack-pairs-b",) if per_gpu > 1 else ())


def _run(client, exp_id, start_s: float, end_s: float | None, tags: dict, metrics: dict, parent: str | None = None):
    tags = {**tags, **({"mlflow.parentRunId": parent} if parent else {})}
    run_id = client.create_run(exp_id, start_time=int(start_s * 1000)).info.run_id
    client.log_batch(run_id, metrics=[Metric(f"summary/{k}", v, 0, 0) for k, v in metrics.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
    client.set_terminated(run_id, "FINISHED", end_time=int(end_s * 1000) if end_s else None)
    return run_id


def test_the_long_queue_is_six_unmodified_scripts_of_the_kinds_asked_for():
    jobs = pb.queue(QUEUES["long"])
    folder = os.path.dirname(QUEUES["long"])
    kinds = {j["kind"] for j in jobs.values()}
    assert len(jobs) >= 6 and {"decoder", "gru", "loader", "gemm", "cnn_train", "timed"} <= kinds
    assert pb.instrumented(jobs, folder) == [] and pb.default_name(QUEUES["long"]) == "long"
    assert all(os.path.exists(os.path.join(folder, j["script"])) for j in jobs.values())
    assert "--seconds 90" in jobs["timed"]["gpu"]
    cmds = plain.commands(QUEUES["long"], dry=False, python="python3")
    assert list(cmds) == list(jobs) and cmds["gru"][0] == "python3" and "radt" not in " ".join(cmds["gru"])


def test_the_plain_lanes_run_the_queue_one_job_per_lane_without_radt_ext(tmp_path):
    """Real processes: each job on the next free lane, stamped, its environment without radt-ext's."""
    (tmp_path / "job.py").write_text(
        "import os, sys, time\ntime.sleep(float(sys.argv[1]))\n"
        "print('radt' if any(k.startswith('RADT_EXT_') for k in os.environ) else 'plain',\n"
        "      os.environ['CUDA_VISIBLE_DEVICES'], f'{sys.argv[2]} samples')\n")
    (tmp_path / "queue.yaml").write_text(yaml.safe_dump(
        {n: {"script": "job.py", "kind": "k", "gpu": f"{s} {i}", "cpu": f"{s} {i}"}
         for i, (n, s) in enumerate((("a", 0.6), ("b", 0.1), ("c", 0.1)))}))
    env = dict(os.environ, RADT_EXT_ACTIVE="x", PYTHONPATH=REPO)
    proc = subprocess.run(["python3", "-m", "benchmarks.packing.plain", "--queue", str(tmp_path / "queue.yaml"),
                           "--out", str(tmp_path / "out"), "--devices", "0,1"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((tmp_path / "out" / "plain.json").read_text())
    jobs = res["jobs"]
    assert list(jobs) == ["a", "b", "c"] and res["devices"] == ["0", "1"]
    assert all(j["rc"] == 0 and j["last"].startswith("plain ") for j in jobs.values())
    # a takes lane 0, b lane 1, and c the lane b freed (long before a ends)
    assert (jobs["a"]["device"], jobs["b"]["device"], jobs["c"]["device"]) == ("0", "1", "1")
    assert jobs["c"]["started"] >= jobs["b"]["ended"] and jobs["c"]["ended"] <= jobs["a"]["ended"]
    assert [j["samples"] for j in jobs.values()] == [0.0, 1.0, 2.0]
    assert res["makespan_s"] >= jobs["a"]["wall_s"] and res["started"] <= jobs["a"]["started"]


def _step(client, exp_id, t0: float, jobs: dict[str, dict], mode: str, gpus: dict | None = None) -> None:
    """One group of all `jobs` starting at t0 (one parent, a child per job); `gpus`: a job's GPU."""
    end = t0 + max(j["wall"] for j in jobs.values()) + 1.0
    parent = _run(client, exp_id, t0, end, {"pack.decision": f"{mode} {len(jobs)} jobs: " + " + ".join(jobs),
                                            "pack.basis": "model", "collocation.mode": mode},
                  {"e2e_gpu_total_energy_j": 100.0 * len(jobs)})
    for name, j in jobs.items():
        metrics = {k: v for k, v in (("e2e_duration_s", j.get("e2e")), ("e2e_samples", j.get("samples")),
                                     ("slowdown_ratio", j.get("reported")), ("guard_paused_s", j.get("paused")))
                   if v is not None}
        active = {"radt_ext.active_start": f"{t0 + 0.5 + j['active'][0]:.3f}",
                  "radt_ext.active_end": f"{t0 + 0.5 + j['active'][1]:.3f}"} if "active" in j else {}
        _run(client, exp_id, t0 + 0.5, t0 + 0.5 + j["wall"], {"sweep.workload": name, "sweep.workload_hash": name,
                                                            "collocation.mode": mode, **active,
                                                            "collocation.gpu": (gpus or {}).get(name, "0")},
             metrics, parent)


def _plan_text(packed_s: float, alone_s: float) -> str:
    """A dry run's totals line, as radt-ext writes it."""
    from radt_ext.packing.explain import totals_line

    plan = SimpleNamespace(predicted_makespan_s=lambda: packed_s, one_per_gpu_makespan_s=lambda: alone_s,
                           gpus={"0": [], "1": []}, overhead_s=0.5,
                           decisions=[SimpleNamespace(jobs=["a", "b", "c"], basis="model", energy_j=None)])
    return "pack plan (...)\n" + totals_line(plan) + "\n"


def test_lived_slowdown_is_wall_time_or_work_rate_packed_against_alone(tmp_path, tracking_uri):
    """steady: 10 s alone, 13 s packed, the same work: 1.3. timed (stops on time): 10 s both, half the
    samples packed: 2.0. plain: no e2e duration recorded, its runs' span: 8 s -> 12 s, 1.5."""
    for script in ("steady.py", "timed.py", "plain.py"):
        (tmp_path / script).write_text("import torch\n")
    kinds = {"steady": "a", "timed": "b", "plain": "c"}
    (tmp_path / "queue.yaml").write_text(yaml.safe_dump({n: {"script": f"{n}.py", "kind": k, "gpu": "", "cpu": ""}
                                                         for n, k in kinds.items()}))
    client = MlflowClient(tracking_uri)
    exp_id = client.create_experiment(pb.experiment("t"))
    alone = {"steady": {"wall": 10.0, "e2e": 10.0, "samples": 1000.0},
             "timed": {"wall": 10.0, "e2e": 10.0, "samples": 2000.0}, "plain": {"wall": 8.0}}
    # on GPU 0 steady's active phase 2..12 s and timed's 4..9 s overlap 5 s; plain alone on GPU 1
    packed = {"steady": {"wall": 13.0, "e2e": 13.0, "samples": 1000.0, "reported": 1.3, "paused": 2.0,
                         "active": (2.0, 12.0)},
              "timed": {"wall": 10.0, "e2e": 10.0, "samples": 1000.0, "reported": 1.0, "active": (4.0, 9.0)},
              "plain": {"wall": 12.0, "active": (1.0, 11.0)}}
    gpus = {"steady": "0", "timed": "0", "plain": "1"}
    t = 1_700_000_000.0
    _step(client, exp_id, t, alone, "exclusive")
    _step(client, exp_id, t + 100, packed, "mps", gpus)
    _step(client, exp_id, t + 200, packed, "mps", gpus)
    steps = {"alone": [t - 1, t + 50], "first": [t + 99, t + 150], "second": [t + 199, t + 250]}
    plans = {}
    for step, planned in (("first", 12.0), ("second", 14.3)):
        plans[step] = str(tmp_path / f"plan_{step}.txt")
        (tmp_path / f"plan_{step}.txt").write_text(_plan_text(planned, 20.0))

    # the queue plain (plain.json): steady 9 s, timed 10 s with 2500 samples by its own count, plain 8 s;
    # 20 s of makespan
    plain_run = {"makespan_s": 20.0, "jobs": {
        "steady": {"rc": 0, "wall_s": 9.0, "samples": None}, "timed": {"rc": 0, "wall_s": 10.0, "samples": 2500.0},
        "plain": {"rc": 0, "wall_s": 8.0, "samples": None}}}
    out = pb.analyse(client, {**steps, "plain": [t - 50, t - 20]}, str(tmp_path / "queue.yaml"), "t", plans,
                     plain=plain_run)
    first = out["passes"]["first"]
    rows = {r["name"]: r for r in first["rows"]}
    assert rows["steady"]["lived"] == pytest.approx(1.3) and rows["steady"]["paused_s"] == 2.0
    assert rows["timed"]["wall_ratio"] == pytest.approx(1.0) and rows["timed"]["rate_ratio"] == pytest.approx(2.0)
    assert rows["timed"]["lived"] == pytest.approx(2.0) and rows["timed"]["gap"] == pytest.approx(0.5)
    assert rows["plain"]["lived"] == pytest.approx(1.5) and rows["plain"]["reported"] is None
    assert (first["max_job"], first["max_job_slowdown"]) == ("timed", pytest.approx(2.0))
    assert first["max_reported_gap"] == pytest.approx(0.5) and first["reported_jobs"] == 2
    assert (first["jobs"], first["kinds"], first["instrumented_jobs"]) == (3, 3, 0)
    # makespans from the groups' spans: alone 11 s, packed 14 s; energy 300 J each
    assert first["makespan_ratio"] == pytest.approx(14.0 / 11.0) and first["energy_ratio"] == pytest.approx(1.0)
    assert first["plan_error"] == pytest.approx(2.0 / 14.0, abs=1e-3)
    assert out["passes"]["second"]["plan_error"] == pytest.approx(0.3 / 14.0, abs=1e-3)
    # against plain: steady 13 / 9; timed 10 / 10 by wall, but 250 samples/s plain over 100 packed: 2.5
    assert rows["steady"]["lived_plain"] == pytest.approx(13.0 / 9.0) and rows["steady"]["plain_wall_s"] == 9.0
    assert rows["timed"]["lived_plain"] == pytest.approx(2.5) and rows["plain"]["lived_plain"] == pytest.approx(1.5)
    assert (first["max_job_plain"], first["max_job_slowdown_plain"]) == ("timed", pytest.approx(2.5))
    assert first["makespan_plain_ratio"] == pytest.approx(14.0 / 20.0)
    assert first["cored_s"] == pytest.approx(5.0)  # GPU 0's two active phases; GPU 1's one counts nothing
    assert out["plain_makespan_s"] == 20.0 and out["min_alone_job_s"] == pytest.approx(8.0) and out["long"] is False
    text = pb.markdown(out)
    assert "## Pass first" in text and "| timed | b | mps" in text and "**2.00**" in text and "| 2.50 |" in text
    assert "Plain (no radt-ext, one job per GPU): makespan 20.0 s" in text

    good = json.loads(json.dumps(out))
    for p, ratio in zip(good["passes"].values(), (0.6, 0.62)):
        p.update(max_job_slowdown=1.4, max_job_slowdown_plain=1.3, makespan_ratio=ratio, makespan_plain_ratio=0.75,
                 max_reported_gap=0.01, plan_error=0.05)
    good.update(queue="g", long=True, min_alone_job_s=95.0)
    sims = {"g": {"chains": 0.93, "packed": 0.74}, "t": {"chains": 0.95, "packed": 0.78}, "command": "python -m ..."}
    summary = pb.summarise([out, good], "NVIDIA H200", sims)
    assert set(summary) == {"bound", "card", "queues", "simulated_long", "goals"} and summary["bound"] == 1.5
    assert summary["simulated_long"] == {"g": sims["g"], "t": sims["t"]}
    assert set(summary["queues"]) == {"t", "g"}
    assert set(summary["queues"]["t"]) == {"long", "min_alone_job_s", "plain_makespan_s", "first", "second"}
    assert summary["queues"]["t"]["plain_makespan_s"] == 20.0 and summary["queues"]["g"]["long"] is True
    assert SUMMARY_PASS_KEYS <= PASS_KEYS <= set(summary["queues"]["t"]["first"])
    assert "rows" not in summary["queues"]["t"]["first"]
    goals = summary["goals"]
    assert goals["instrumented_jobs == 0"] is True and goals["max_job_slowdown <= 1.65 in every pass"] is False
    assert goals["max_job_slowdown_plain <= 1.65 in every pass"] is False  # t: timed's 2.5
    assert goals["plan_error <= 0.10 in every pass"] is False  # t's first pass: 0.14
    assert goals["two simulated long queues: packed <= 0.8 of plain where chains >= 0.9"] is True
    only_good = pb.summarise([good], "x", sims)["goals"]
    assert all(only_good.values()), only_good
    text = pb.summary_markdown(summary)
    assert "| g | yes | 95.0 |" in text and "g chains 0.930, packed 0.740" in text
    good["passes"]["second"]["makespan_plain_ratio"] = 0.84  # within a long queue's 0.85
    assert all(pb.summarise([good], "x", sims)["goals"].values())
    good["long"] = False  # ... not within a short one's 0.8
    assert pb.summarise([good], "x", sims)["goals"][
        "makespan <= 0.8 of plain in every pass (0.85 on a long queue)"] is False
    good["long"] = True
    good["passes"]["first"]["cored_s"] = 0.0  # a long queue that never co-ran its active phases
    assert pb.summarise([good], "x", sims)["goals"]["a long queue co-runs (cored_s > 0) in every pass"] is False
    good["passes"]["second"]["makespan_ratio"] = 0.7  # 0.1 above the first pass's
    assert pb.summarise([good], "x")["goals"]["second makespan_ratio <= first + 0.05"] is False
    good["passes"]["second"]["plan_error"] = None
    assert pb.summarise([good], "x")["goals"]["plan_error <= 0.10 in every pass"] is None


@pytest.mark.slow
@pytest.mark.parametrize("name,picked,calls", [  # every queue runs this one flow; the long one's a step a call
    ("long", ("decoder", "gru", "timed"), [("alone", "0"), ("plain", "1"), ("pairs first second", "0")])])  # PARTS, KEEP
def test_pack_bound_dry_flow_writes_each_pass_and_the_summary(tmp_path, name, picked, calls):
    """The driver's DRY flow (CPU, NVML replay, stand-in MPS daemon) on three jobs of a queue: plain, alone,
    the pairs measured (each job alone and every two side by side, in a sweep of their own), first and second
    planned knowing them, the analysis and the summary; plumbing only."""
    jobs = {n: j for n, j in pb.queue(QUEUES[name]).items() if n in picked}
    folder = tmp_path / "queue"
    folder.mkdir()
    for j in jobs.values():
        shutil.copy(os.path.join(os.path.dirname(QUEUES[name]), j["script"]), folder)
        j["script"] = os.path.basename(j["script"])
    (folder / "queue.yaml").write_text(yaml.safe_dump(jobs))
    results = tmp_path / "results"
    env = dict(os.environ, DRY="1", RESULTS=str(results), QUEUE=str(folder / "queue.yaml"), NAME=name,
               WORK=str(tmp_path / "w"), HOME=str(tmp_path),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],  # python3: this one
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for parts, keep in calls:
        proc = subprocess.run(["bash", "benchmarks/packing/pack_bound.sh"], cwd=REPO, capture_output=True,
                              env={**env, "KEEP": keep, "PARTS": parts}, text=True, timeout=560)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for f in ("alone.yaml", "first.yaml", "second.yaml", "plan_first.txt", "plan_second.txt", "machine.txt",
              "plain.json", f"{name}.md"):
        assert (results / f).exists(), f
    assert set(json.loads((results / "steps.json").read_text())) == {"plain", "alone", "pairs", "first", "second"}
    from radt_ext.sweep.spec import load

    pairs = yaml.safe_load((results / "pairs.yaml").read_text())  # 3 jobs alone, then their 3 pairs
    assert pairs["name"] == f"pack-pairs-{name}" and len(pairs["groups"]) == 6
    assert load(str(results / "first.yaml")).pack.pairs_from == (f"pack-pairs-{name}",)
    assert load(str(results / "alone.yaml")).pack.pairs_from == ()
    assert (results / "pairs.log").read_text().count(": FINISHED") == 6
    ran_plain = json.loads((results / "plain.json").read_text())
    assert set(ran_plain["jobs"]) == set(picked) and all(j["rc"] == 0 for j in ran_plain["jobs"].values())
    assert ran_plain["devices"] == ["0", "1"]  # a lane per GPU of the specs
    out = json.loads((results / f"{name}.json").read_text())
    assert out["experiment"] == f"pack-bound-{name}" and set(out["passes"]) == {"first", "second"}
    assert out["plain_makespan_s"] == ran_plain["makespan_s"] and out["min_alone_job_s"] > 0
    for p in out["passes"].values():
        assert PASS_KEYS <= set(p) and (p["jobs"], p["instrumented_jobs"], p["finished"]) == (3, 0, "3/3"), p
        assert {r["name"] for r in p["rows"]} == set(picked) and all(ROW_KEYS <= set(r) for r in p["rows"])
        assert all(r["lived"] is not None and r["lived_plain"] is not None for r in p["rows"])  # both baselines found
        assert p["makespan_plain_ratio"] is not None and p["cored_s"] is not None
    proc = subprocess.run(["python3", "-m", "benchmarks.packing.pack_bound", "summarise", "--out", str(results),
                           "--card", "CPU (dry run)", str(results / f"{name}.json")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((results / "summary.json").read_text())
    assert set(summary) == {"bound", "card", "queues", "simulated_long", "goals"}
    assert set(summary["queues"][name]) == {"long", "min_alone_job_s", "plain_makespan_s", "first", "second"}
    assert SUMMARY_PASS_KEYS <= set(summary["queues"][name]["first"])
