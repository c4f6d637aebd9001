"""A packed sweep against the plain pass of its jobs (`radt-ext sweep FILE --plain`) in a real SQLite store:
the dry run's plan line and the run's summary give the makespan and each job's wall against the plain
ones, and the job runs and the report run carry them; without a plain pass, nothing of it."""
from __future__ import annotations

import re

from mlflow.tracking import MlflowClient

from radt_ext.packing import against_plain
from tests.radt_ext.helpers import radt
from tests.radt_ext.packing.test_pack_sweep import profile_all, spec


def test_a_packed_sweep_is_measured_against_the_newest_plain_pass(tmp_path, two_gpus):
    path = spec(tmp_path, {x: "--seconds 0.4" for x in "abcd"})
    hashes = profile_all(two_gpus, path)
    dry = radt("sweep", path, "--dry-run", env={"COLUMNS": "250"}, cwd=tmp_path)
    assert dry.returncode == 0 and "plain" not in dry.stderr, dry.stderr  # no plain pass: nothing extra
    plain = radt("sweep", path, "--plain", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    client = MlflowClient(two_gpus)
    exp = client.get_experiment_by_name("queue").experiment_id
    plain_run = client.search_runs([exp], "tags.`sweep.pass` = 'plain' and tags.`sweep.jobs` = '4'")[0]
    walls = {r.data.tags["sweep.workload"]: r.data.metrics["summary/wall_s"] for r in client.search_runs(
        [exp], f"tags.`mlflow.parentRunId` = '{plain_run.info.run_id}'")}

    dry = radt("sweep", path, "--dry-run", env={"COLUMNS": "250"}, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert re.search(rf"against the plain pass \(run {plain_run.info.run_id[:12]}, 4 jobs\): predicted makespan "
                     r"[0-9.]+ s against [0-9.]+ s plain \(ratio [0-9.]+\); predicted each job's wall against its "
                     r"plain wall: median [0-9.]+, worst \S+ [0-9.]+", dry.stderr), dry.stderr

    done = radt("sweep", path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = re.search(r"against the plain pass \(run \w+, 4 jobs\): makespan ([0-9.]+) s against ([0-9.]+) s plain "
                     r"\(ratio ([0-9.]+)\); each job's wall against its plain wall: median [0-9.]+, worst \S+ "
                     r"([0-9.]+) \(summary/slowdown_vs_plain on each job's run\)", done.stderr)
    assert line, done.stderr
    jobs = [r for r in client.search_runs([exp], "attributes.status = 'FINISHED'") if r.data.tags.get("pack.job")]
    assert {r.data.tags["pack.job"] for r in jobs} == set(hashes.values())
    worst = 0.0
    for r in jobs:  # each job's own wall against its plain wall, on its run
        plain_wall = walls[r.data.tags["sweep.workload"]]
        assert r.data.metrics[against_plain.PLAIN_WALL] == plain_wall
        ratio = r.data.metrics[against_plain.SLOWDOWN]
        assert abs(ratio - r.data.metrics["summary/e2e_duration_s"] / plain_wall) < 1e-6
        assert r.data.tags[against_plain.PLAIN_RUN_TAG] == plain_run.info.run_id
        worst = max(worst, ratio)
    assert float(line.group(4)) == round(worst, 2)
    report = client.search_runs([exp], "tags.`sweep.role` = 'report'")[0]
    assert report.data.tags[against_plain.PLAIN_RUN_TAG] == plain_run.info.run_id
    assert "radt_ext.report_error" not in report.data.tags
    m = report.data.metrics
    assert abs(m["pack/plain_makespan_s"] - plain_run.data.metrics["summary/makespan_s"]) < 1e-9
    assert abs(m["pack/makespan_vs_plain"] - m["pack/makespan_s"] / m["pack/plain_makespan_s"]) < 1e-9
    assert f"{m['pack/makespan_vs_plain']:.2f}" == line.group(3)
