"""Where a group's runs land and what the parent carries at the end: one experiment for parent
and children, and the parent's plotly report with the children stacked (real CPU children,
real SQLite store)."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from radt_ext.collocation import Group, Workload, run_group
from radt_ext.report import ARTIFACT
from tests.radt_ext.collocation.support import cpu_command
from tests.radt_ext.helpers import radt
from tests.radt_ext.report import page as shown


def _family(uri, parent_run_id):
    client = MlflowClient(uri)
    parent = client.get_run(parent_run_id)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent_run_id]
    return client, parent, children


@pytest.mark.parametrize("named, env", [
    ("grp", {"MLFLOW_EXPERIMENT_ID": "0"}),  # the group's name wins over an inherited experiment id
    (None, {"MLFLOW_EXPERIMENT_NAME": "from-env"}),  # no name: parent and children follow the environment
])
def test_children_share_the_parent_experiment(tracking_uri, monkeypatch, named, env):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    g = Group(mode="naive", experiment_name=named, interval=0.1, listeners="", child_listeners="top",
              workloads=[Workload(f"w{i}", cpu_command(0.3), device="cpu") for i in range(2)])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FINISHED"
    client, parent, children = _family(tracking_uri, result.parent_run_id)
    expected = client.get_experiment_by_name(named or "from-env").experiment_id
    assert expected != "0"
    assert parent.info.experiment_id == expected
    assert [c.info.experiment_id for c in children] == [expected, expected]


def test_parent_logs_a_report_with_the_children_stacked(tracking_uri):
    g = Group(mode="naive", experiment_name="grp", interval=0.1, listeners="", child_listeners="top",
              workloads=[Workload(f"w{i}", cpu_command(0.6, bs), device="cpu") for i, bs in enumerate((8, 32))])
    result = run_group(g, echo=lambda m: None)
    client, parent, children = _family(tracking_uri, result.parent_run_id)
    assert "radt_ext.report_error" not in parent.data.tags
    with open(client.download_artifacts(result.parent_run_id, ARTIFACT), encoding="utf-8") as fh:
        page = fh.read()
    assert "collocation group naive:w0+w1 (naive)" in shown.text(page)
    stacked = shown.figures(page)[0]
    assert shown.titles(stacked)[0] == "2 workloads, stacked on one time axis"
    for child in children:  # one legend entry per child, from its own `top` timeline
        assert f"{child.info.run_name} ({child.info.run_id[:8]})" in shown.trace_names(stacked)
    assert any(t.startswith("CPU") for t in shown.titles(stacked)), shown.titles(stacked)


def test_collocate_cli_children_in_the_named_experiment(tracking_uri):
    done = radt("collocate", "--mode", "exclusive", "--device", "cpu", "--listeners", "", "--child-listeners",
                "top", "--interval", "0.1", "--experiment-name", "cli-grp",
                "-w", " ".join(cpu_command(0.2)), "-w", " ".join(cpu_command(0.2)))
    assert done.returncode == 0, done.stderr
    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("cli-grp")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 3 and {r.info.experiment_id for r in runs} == {exp.experiment_id}
