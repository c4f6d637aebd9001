"""A queue's pairs measured side by side (benchmarks/packing/pair_rates.py and .sh): the sweep spec (each job
of the pairs alone, then each pair as one group), a bad pair named in one line, the simulator's floor, and
(slow) the driver's dry flow on the CPU: a real sweep whose MPS group (the stand-in daemon) measures its pair,
read back as the simulator's data with a base fixture's pairs after it. No timing is asserted."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from benchmarks.packing import pair_rates
from benchmarks.packing import simulate_long as sim
from radt_ext.sweep.plan import expand
from radt_ext.sweep.spec import parse
from tests.conftest import REPO

QUEUE = os.path.join(REPO, "examples", "pack_bound", "queue.yaml")
BASE = os.path.join(REPO, "tests", "radt_ext", "packing", "fixtures", "queue_b_h200_rates.json")


def test_the_spec_runs_each_job_of_the_pairs_alone_then_each_pair_in_its_order():
    jobs = pair_rates.pack_bound.queue(QUEUE)
    pairs = pair_rates.parse_pairs("vae+epochs, unet+vae", jobs)
    spec = yaml.safe_load(pair_rates.spec(QUEUE, "b", pairs, "mps", dry=False))
    assert spec["name"] == "pack-pairs-b" and spec["devices"] == ["0"]
    assert set(spec["workloads"]) == {"vae", "epochs", "unet"}  # only the jobs the pairs use
    assert spec["workloads"]["vae"]["command"].endswith("vae.py " + jobs["vae"]["gpu"])
    alone = [g for g in spec["groups"] if g["modes"] == ["exclusive"]]
    assert sorted(g["workloads"][0] for g in alone) == ["epochs", "unet", "vae"]
    assert [g["workloads"] for g in spec["groups"] if g["modes"] == ["mps"]] == [["vae", "epochs"], ["unet", "vae"]]
    # the jobs are the packed sweep's jobs (the same workload hashes): its `pack: {pairs_from: [...]}` finds them
    packed = yaml.safe_load(pair_rates.pack_bound.spec("first", False, "naive,mps", 1.5, QUEUE, "pack-bound-b"))
    keys = [{w.name: w.key for v in expand(parse(d, source="s")) for w in v.workloads} for d in (spec, packed)]
    assert keys[0] and all(keys[1][n] == k for n, k in keys[0].items())


def test_every_pair_in_short_windows_on_the_gpus_given():
    """PAIRS=all: every two of the queue's jobs in its order; MEASURE_S: each group (alone and each pair)
    stopped once measured; --devices: the GPUs its groups take."""
    jobs = pair_rates.pack_bound.queue(QUEUE)
    pairs = pair_rates.parse_pairs("all", jobs)
    n = len(jobs)
    assert len(pairs) == n * (n - 1) // 2 and pairs[0] == tuple(list(jobs)[:2])
    spec = yaml.safe_load(pair_rates.spec(QUEUE, "b", pairs, "mps", dry=False, measure_s=8, devices=["0", "1"]))
    assert spec["devices"] == ["0", "1"] and len(spec["groups"]) == n + len(pairs)
    assert all(g["measure_s"] == 8 for g in spec["groups"])
    from radt_ext.sweep.spec import parse

    assert parse(spec, source="pairs.yaml").groups[-1].measure_s == 8.0  # a spec the sweep takes


@pytest.mark.parametrize("text", ["vae", "vae+nope", "vae+vae", "vae+epochs,unet-vae"])
def test_a_pair_that_is_not_two_jobs_of_the_queue_is_one_line(text):
    with pytest.raises(SystemExit) as exc:
        pair_rates.parse_pairs(text, pair_rates.pack_bound.queue(QUEUE))
    assert "A+B" in str(exc.value) and "\n" not in str(exc.value)


def test_the_floor_plays_no_job_faster_beside_another_than_alone():
    with open(BASE) as fh:
        data = json.load(fh)
    low = dict(data, pairs=[{"a": "vae", "b": "epochs", "mode": "mps", "slowdowns": [0.8, 1.2]}],
               boots=[{"active": "vae", "starting": "epochs", "mode": "mps", "slowdown": 0.9}])
    out = sim.floored(low, 1.0)
    assert out["pairs"][0]["slowdowns"] == [1.0, 1.2] and out["boots"][0]["slowdown"] == 1.0
    assert low["pairs"][0]["slowdowns"] == [0.8, 1.2]  # the data read is left as it was


@pytest.mark.slow
def test_the_dry_flow_measures_its_pair_and_writes_the_simulators_data(tmp_path):
    results = tmp_path / "results"
    env = dict(os.environ, DRY="1", RESULTS=str(results), NAME="b", PAIRS="vae+epochs", WORK=str(tmp_path / "w"),
               HOME=str(tmp_path), PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(["bash", "benchmarks/packing/pair_rates.sh"], cwd=REPO, capture_output=True, env=env,
                          text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for f in ("pairs.yaml", "machine.txt", "sweep.log", "rates.json", "mlflow.db.xz"):
        assert (results / f).exists(), f
    data = json.loads((results / "rates.json").read_text())
    assert {"vae", "epochs"} <= set(data["jobs"]) and data["experiment"] == "pack-pairs-b"
    assert [(p["mode"], {p["a"], p["b"]}) for p in data["pairs"]] == [("mps", {"vae", "epochs"})]
    assert all(s > 0 for s in data["pairs"][0]["slowdowns"])
    # with a base: this store's pairs first, then the base's; its jobs as measured here, the others the base's
    store = f"sqlite:///{tmp_path / 'w' / 'mlflow.db'}"
    merged = pair_rates.fixture(store, "pack-pairs-b", BASE, "CPU", None)
    with open(BASE) as fh:
        base = json.load(fh)
    assert merged["pairs"] == data["pairs"] + base["pairs"] and merged["boots"][-len(base["boots"]):] == base["boots"]
    assert merged["jobs"]["vae"] == data["jobs"]["vae"] and merged["jobs"]["unet"] == base["jobs"]["unet"]
    assert merged["order"] == base["order"]
