"""A resumed sweep whose spec changed in between, and the sweep's report run (real CPU children,
real SQLite store, the real CLI).

The H200 sweep re-ran `dlrm-x1` on resume: between the two calls examples/sweeps/gpu_collocation.yaml
changed DLRM's table_rows (1000000 → 500000), so the variant's content hash changed. That is the
intended match; the resume now says so and tags the new run with the one it supersedes.
"""
from __future__ import annotations

import os
import sys
import textwrap

from mlflow.tracking import MlflowClient

from tests.radt_ext.collocation.support import WORKLOAD
from tests.radt_ext.helpers import radt
from tests.radt_ext.report import page as shown

TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "listeners", "traces", "h200_matmul.json")


def write_spec(path, toy_seconds):
    path.write_text(textwrap.dedent(f"""
        name: changing
        experiment: changing
        devices: [cpu]
        interval: 0.1
        child_listeners: top
        workloads:
          toy: {{command: "{sys.executable} {WORKLOAD} --seconds {{seconds}} --batch-size 8", params: {{seconds: {toy_seconds}}}}}
          other: {{command: "{sys.executable} {WORKLOAD} --seconds 0.2 --batch-size 4"}}
        groups:
          - {{workloads: [toy], modes: [exclusive]}}
          - {{workloads: [other], modes: [exclusive]}}
    """))
    return path


def finished_parents(uri, group):
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("changing").experiment_id],
                              f"tags.`sweep.group` = '{group}' and attributes.status = 'FINISHED'")
    return runs


def test_a_param_changed_between_calls_reruns_that_variant_and_says_why(tmp_path, tracking_uri):
    spec = write_spec(tmp_path / "s.yaml", 0.3)
    first = radt("sweep", str(spec))
    assert first.returncode == 0, first.stderr
    (old,) = finished_parents(tracking_uri, "toy")
    write_spec(spec, 0.4)  # the spec is edited before the resume, as on the H200
    dry = radt("sweep", str(spec), "--dry-run", env={"COLUMNS": "200"})
    assert "spec changed, rerun" in dry.stderr and "2 variants, 1 to run, 1 done" in dry.stdout
    second = radt("sweep", str(spec), env={"COLUMNS": "300"})
    assert second.returncode == 0, second.stderr
    text = " ".join(second.stderr.split())
    assert f"spec changed since FINISHED run {old.info.run_id} (toy: seconds 0.3 → 0.4); running it again" in text
    assert "exclusive other on cpu: FINISHED before" in text  # the unchanged one is skipped
    runs = finished_parents(tracking_uri, "toy")
    assert len(runs) == 2
    new = next(r for r in runs if r.info.run_id != old.info.run_id)
    assert new.data.tags["sweep.supersedes"] == old.info.run_id
    assert new.data.tags["sweep.hash"] != old.data.tags["sweep.hash"]
    assert len(finished_parents(tracking_uri, "other")) == 1


def test_sweep_logs_its_report_on_one_run_of_its_own(tmp_path, tracking_uri):
    spec = tmp_path / "r.yaml"
    spec.write_text(textwrap.dedent(f"""
        name: rep
        experiment: rep
        devices: ["0"]
        interval: 0.1
        listeners: nvml:0.1
        child_listeners: top
        workloads:
          toy: {{command: "{sys.executable} {WORKLOAD} --seconds 0.5 --batch-size 8"}}
        groups:
          - {{workloads: [toy], modes: [exclusive]}}
          - {{workloads: [toy, toy], modes: [naive]}}
    """))
    env = {"RADT_EXT_NVML_REPLAY": TRACE}  # the group energy comes from a recorded H200 trace
    done = radt("sweep", str(spec), env=env)
    assert done.returncode == 0, done.stderr
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("rep").experiment_id
    (report,) = client.search_runs([exp], "tags.`sweep.role` = 'report'")
    assert report.data.tags["sweep.id"] == "rep" and report.info.status == "FINISHED"
    assert f"report radt_ext_sweep_report.html on run {report.info.run_id}" in " ".join(done.stderr.split())
    with open(client.download_artifacts(report.info.run_id, "radt_ext_sweep_report.html"), encoding="utf-8") as fh:
        page = fh.read()
    assert "radt-ext sweep rep: 5 runs" in shown.text(page)  # 2 parents + 3 children; not the report run itself
    scatter, bars, heat = shown.figures(page)[:3]
    assert shown.titles(scatter)[0] == "Time vs energy per collocation group (makespan)"
    assert "Pareto front" in shown.trace_names(scatter)
    assert shown.titles(heat)[0].startswith("Collocation slowdown") and heat["data"][0]["type"] == "heatmap"
    assert shown.titles(bars)[0].startswith("Throughput and energy per sample")
    # a resume (nothing left to run) rebuilds the report on the same run
    again = radt("sweep", str(spec), env=env)
    assert again.returncode == 0, again.stderr
    assert len(client.search_runs([exp], "tags.`sweep.role` = 'report'")) == 1
