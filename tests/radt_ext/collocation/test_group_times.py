"""MLflow's own columns of a group's child runs: a workload that waits its turn (a chain's start offset,
or one after another) has its run start when its process starts and end when its process ends; what it
waited after the group started is its `summary/wait_s` (real CPU children, a real SQLite store)."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.collocation import Group, Workload, run_group
from tests.radt_ext.collocation.support import cpu_command, stamps


@pytest.mark.parametrize("mode", ["naive", "exclusive"])
def test_a_run_that_waits_its_turn_starts_and_ends_with_its_process(tracking_uri, tmp_path, mode):
    stamp = str(tmp_path / "stamps.txt")
    first = Workload("first", cpu_command(2.5, 8, stamp), device="cpu")
    later = Workload("later", cpu_command(0.5, 16, stamp), device="cpu",
                     start_offset_s=2.0 if mode == "naive" else None)
    result = run_group(Group(mode=mode, workloads=[first, later], experiment_name="times", interval=0.1,
                             listeners="", child_listeners="top"), echo=lambda m: None)
    assert result.status == "FINISHED"
    client = MlflowClient(tracking_uri)
    spawned = {c.name: c for c in result.children}
    assert spawned["later"].started - result.t0 >= 1.9  # it did wait its turn
    wrote = {int(bs): float(t) for _, t, bs, *_ in stamps(stamp)}  # when each process began its own code
    for c in result.children:
        run = client.get_run(c.run_id)
        start, end = run.info.start_time / 1000.0, run.info.end_time / 1000.0
        assert abs(start - c.started) < 1.0, (c.name, start - c.started)
        assert start <= wrote[8 if c.name == "first" else 16]  # its run existed before its code ran
        assert abs(end - c.ended) < 0.5, (c.name, end - c.ended)
        assert run.data.metrics["summary/wait_s"] == pytest.approx(c.started - result.t0, abs=0.05)
        assert c.summary["wait_s"] == run.data.metrics["summary/wait_s"]
    later_run = client.get_run(spawned["later"].run_id)
    assert later_run.data.metrics["summary/wait_s"] >= 1.9
    # its run's span in MLflow's columns is its process's, not its group's
    assert (later_run.info.end_time - later_run.info.start_time) / 1000.0 < spawned["later"].ended - result.t0 - 1.5


def test_every_chained_workload_has_its_run_one_that_cannot_be_spawned_too(tracking_uri, tmp_path):
    # the first one fails at once; the later one still runs at its turn, and one that cannot be spawned
    # gets a FAILED run of its own when its turn comes
    first = Workload("first", cpu_command(0.2, 8, exit=3), device="cpu")
    later = Workload("later", cpu_command(0.2, 16), device="cpu", start_offset_s=5.0)
    missing = Workload("missing", ["/nonexistent/program"], device="cpu", start_offset_s=0.1)
    result = run_group(Group(mode="naive", workloads=[first, later, missing], experiment_name="times",
                             interval=0.1, listeners="", child_listeners="top"), echo=lambda m: None)
    client = MlflowClient(tracking_uri)
    statuses = {c.name: client.get_run(c.run_id).info.status for c in result.children}
    assert statuses == {"first": "FAILED", "later": "FINISHED", "missing": "FAILED"}
    kids = client.search_runs([client.get_experiment_by_name("times").experiment_id],
                              f"tags.`mlflow.parentRunId` = '{result.parent_run_id}'")
    assert len(kids) == 3
