"""A sweep that measures pairs in short windows (`measure_s` on its groups): each job alone, then the two side
by side, every one stopped once its window is done; the store then holds the pair as pack.pairs_from reads it,
and a re-run finds every group done."""
from __future__ import annotations

import json
import os
import sys
import textwrap
import time

from mlflow.tracking import MlflowClient

from radt_ext.packing import profiles
from tests.radt_ext.helpers import radt
from tests.conftest import REPO

JOB = os.path.join(REPO, "tests", "radt_ext", "collocation", "guard_job.py")


def test_a_sweep_measures_a_pair_in_short_windows_for_pairs_from(tracking_uri, tmp_path):
    spec = tmp_path / "pairs.yaml"
    jobs = {name: f"{sys.executable} {JOB} --steps 100000 --work {work} --cpu 0"
            for name, work in (("a", 150000), ("b", 120000))}
    spec.write_text(textwrap.dedent(f"""\
        name: pairs
        experiment: pack-pairs-t
        devices: [cpu]
        interval: 0.2
        workloads:
          a: {{command: "{jobs['a']}"}}
          b: {{command: "{jobs['b']}"}}
        groups:
          - {{workloads: [a], modes: [exclusive], measure_s: 3}}
          - {{workloads: [b], modes: [exclusive], measure_s: 3}}
          - {{workloads: [a, b], modes: [naive], measure_s: 3}}
        """))
    env = {"MLFLOW_TRACKING_URI": tracking_uri, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.time()
    proc = radt("sweep", str(spec), env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert time.time() - t0 < 200, "each group stopped once measured, not at its 100000 steps"
    said = proc.stdout + proc.stderr
    assert said.count("FINISHED") >= 3 and "3 s side by side measured: stopping a, b" in said

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("pack-pairs-t")
    found = client.search_runs([exp.experiment_id])
    parents = [r for r in found if "mlflow.parentRunId" not in r.data.tags and r.data.tags.get("sweep.hash")]
    assert len(parents) == 3 and all(p.info.status == "FINISHED" for p in parents)
    assert all(p.data.tags["collocation.measured_s"] == "3" for p in parents)
    shared = next(p for p in parents if p.data.tags["collocation.mode"] == "naive")
    pair, = json.loads(shared.data.tags["collocation.pairs"])  # against the rates of the two windows alone
    assert {pair["a"], pair["b"]} == {"a", "b"} and pair["span_s"] >= 2.0 and all(x > 0 for x in pair["slowdowns"])

    known = profiles.measured_in(client, ("pack-pairs-t",))  # what a packed sweep's pack.pairs_from reads
    group, = known.groups
    assert group.mode == "naive" and group.run_id == shared.info.run_id and len(group.keys) == 2

    again = radt("sweep", str(spec), "--dry-run", env=env, timeout=120)
    assert again.returncode == 0 and "3 variants, 0 to run, 3 done" in again.stdout + again.stderr
