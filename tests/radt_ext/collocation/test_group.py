"""Exclusive and naive groups: real CPU child processes, a real SQLite store, parent + child runs."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.collocation import Group, Workload, run_group
from radt_ext.errors import UsageError
from tests.radt_ext.collocation.support import cpu_command, stamps
from tests.radt_ext.helpers import radt


def runs_by_parent(uri):
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children


def group(mode, tmp_path, sizes=(16, 64), seconds=0.8, together=False, **kw):
    """together: the workloads start their work together, so their active phases overlap."""
    stamp = str(tmp_path / f"stamps-{mode}.txt")
    workloads = [Workload(f"w{i}", cpu_command(seconds, bs, stamp, together=len(sizes) if together else 0),
                          device="cpu", params={"batch_size": str(bs)})
                 for i, bs in enumerate(sizes)]
    return Group(mode=mode, workloads=workloads, experiment_name="colloc", interval=0.1, **kw), stamp


def test_naive_starts_together_with_different_params(tracking_uri, tmp_path):
    g, stamp = group("naive", tmp_path, together=True)
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FINISHED" and result.exit_code == 0
    assert result.start_skew_s < 0.5  # all spawned right after one another, behind the barrier
    started = sorted(float(s[1]) for s in stamps(stamp))
    assert len(started) == 2 and started[-1] - started[0] < 2.0  # the processes ran side by side
    assert sorted(int(s[2]) for s in stamps(stamp)) == [16, 64]  # each got its own params
    parents, children = runs_by_parent(tracking_uri)
    assert len(parents) == 1 and len(children) == 2
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["collocation.mode"] == "naive"
    assert parent.data.tags["collocation.workloads"] == "w0,w1"
    assert parent.data.tags["collocation.gpu"] == "cpu"
    for child in children:
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.info.status == "FINISHED"
        assert child.data.tags["collocation.mode"] == "naive"
        assert child.data.params["batch_size"] in ("16", "64")
        assert child.data.metrics["summary/samples"] > 0
        assert any(k.startswith("system/proc_") for k in child.data.metrics)  # top: the child's own tree
    total = sum(c.data.metrics["summary/e2e_samples"] for c in children)
    m = parent.data.metrics
    assert m["summary/e2e_samples"] == total
    assert m["summary/samples"] == sum(c.data.metrics["summary/samples"] for c in children)  # in their active phases
    assert m["summary/makespan_s"] == pytest.approx(result.makespan_s)
    assert m["summary/e2e_throughput_samples_per_s"] == pytest.approx(total / result.makespan_s)
    assert parent.data.tags["radt_ext.active_source"] == "progress"
    # the overlap: the window in which both workloads were active, on the parent and on each child
    assert 0 < m["summary/overlap_s"] <= min(c.data.metrics["summary/active_s"] for c in children)
    for child in children:
        cm = child.data.metrics
        assert cm["summary/overlap_s"] == pytest.approx(m["summary/overlap_s"])
        assert cm["summary/overlap_throughput_samples_per_s"] > 0
        assert float(child.data.tags["collocation.overlap_start"]) >= child.info.start_time / 1000
    assert 0.8 <= result.makespan_s < 0.8 * 2 + 5


def test_exclusive_runs_one_after_another_and_slowdown_against_baselines(tracking_uri, tmp_path):
    g, stamp = group("exclusive", tmp_path, seconds=0.6)
    excl = run_group(g, echo=lambda m: None)
    assert excl.status == "FINISHED"
    a, b = excl.children
    assert b.started >= a.ended  # sequential
    assert "overlap_s" not in excl.summary  # one after another: no overlap
    baselines = {c.name: (c.run_id, c.summary["e2e_duration_s"]) for c in excl.children}
    g2, _ = group("naive", tmp_path, seconds=0.6, together=True, baselines=baselines)
    coll = run_group(g2, echo=lambda m: None)
    client = MlflowClient(tracking_uri)
    parent = client.get_run(coll.parent_run_id)
    for c in coll.children:
        base = next(b for b in excl.children if b.name == c.name).summary
        # as the job lived it: its wall time here over its wall time alone, or its work rate alone over its
        # rate here over the whole run, the larger
        lived = max(c.summary["e2e_duration_s"] / base["e2e_duration_s"],
                    base["e2e_throughput_samples_per_s"] / c.summary["e2e_throughput_samples_per_s"])
        assert c.slowdown == pytest.approx(lived)
        assert client.get_run(c.run_id).data.tags["collocation.slowdown_basis"] in ("wall", "samples/s over the whole run")
        child = client.get_run(c.run_id)
        assert child.data.metrics["summary/slowdown_ratio"] == pytest.approx(lived)
        # beside it, the active phase's: throughput alone over throughput in the overlap
        active = base["throughput_samples_per_s"] / c.summary["overlap_throughput_samples_per_s"]
        assert child.data.metrics["summary/active_slowdown_ratio"] == pytest.approx(active)
        assert child.data.tags["baseline_run_id"] == baselines[c.name][0]
        assert parent.data.metrics[f"summary/{c.name}_slowdown_ratio"] == pytest.approx(lived)
    assert parent.data.metrics["summary/max_slowdown_ratio"] == pytest.approx(max(c.slowdown for c in coll.children))


def test_a_failing_workload_fails_the_group_not_the_others(tracking_uri, tmp_path):
    stamp = str(tmp_path / "s.txt")
    g = Group(mode="naive", experiment_name="x", interval=0.1, workloads=[
        Workload("ok", cpu_command(0.3, 8, stamp), device="cpu"),
        Workload("bad", cpu_command(0.3, 8, stamp, exit=3), device="cpu")])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FAILED" and result.exit_code == 3
    assert {c.name: c.status for c in result.children} == {"ok": "FINISHED", "bad": "FAILED"}
    assert MlflowClient(tracking_uri).get_run(result.parent_run_id).info.status == "FAILED"


@pytest.mark.parametrize("workloads, message", [
    ([Workload("a", ["true"]), Workload("a", ["true"])], "used twice"),
    ([Workload("a b", ["true"])], "workload name"),
    ([Workload("a", [], device="cpu")], "has no command"),
])
def test_bad_groups_are_one_line_before_any_run(tracking_uri, workloads, message):
    with pytest.raises(UsageError, match=message):
        run_group(Group(mode="naive", workloads=workloads))
    assert runs_by_parent(tracking_uri) == ([], [])


def test_collocate_cli(tracking_uri, tmp_path):
    cmd = " ".join(cpu_command(0.3, 8))
    done = radt("collocate", "--mode", "naive", "--device", "cpu", "-i", "0.1", "--name", "a", "--name", "b",
                "-w", cmd, "-w", cmd.replace("--batch-size 8", "--batch-size 4"))
    assert done.returncode == 0, done.stderr
    assert "group FINISHED" in done.stderr
    parents, children = runs_by_parent(tracking_uri)
    assert len(parents) == 1 and sorted(c.info.run_name for c in children) == ["a", "b"]
    bad = radt("collocate", "--mode", "teleport", "-w", "true")
    assert bad.returncode == 2 and "teleport" in bad.stderr and "Traceback" not in bad.stderr
