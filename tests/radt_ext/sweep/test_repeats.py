"""A sweep that repeats its settings: the results table gives each setting's mean and 95 % interval
(plain and whole in a log, CSV/JSON for scripts), the store holds each setting's means as a run under
the sweep's report run, and the report has their table (real CLI, real SQLite store, real workloads)."""
from __future__ import annotations

import json
import statistics
import sys
import textwrap

from mlflow.tracking import MlflowClient
from scipy.stats import t

from tests.radt_ext.collocation.support import WORKLOAD
from tests.radt_ext.helpers import radt


def test_repeated_settings_as_means_with_intervals_in_the_table_the_store_and_the_report(tracking_uri, tmp_path):
    path = tmp_path / "repeats.yaml"
    path.write_text(textwrap.dedent(f"""
        name: rep
        experiment: repeats
        devices: [cpu]
        repeats: 2
        listeners: top
        child_listeners: top
        interval: 0.1
        workloads:
          w: {{command: "{sys.executable} {WORKLOAD} --seconds 0.4 --batch-size {{bs}}", params: {{bs: 8}}}}
        grid: {{bs: [8, 64]}}
    """))
    done = radt("sweep", str(path), "--output", "json", timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)  # stdout holds the table alone
    assert [(r["params"], r["runs"]) for r in rows] == [("bs=8", 2), ("bs=64", 2)]
    assert all(r["status"] == "2 FINISHED" for r in rows)

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name("repeats").experiment_id
    runs = client.search_runs([exp], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("sweep.group") and not r.data.tags.get("sweep.role")]
    by_bs: dict[str, list] = {}
    for r in parents:
        by_bs.setdefault(r.data.tags["sweep.param.bs"], []).append(r)
    key = "summary/makespan_s"
    for row in rows:
        values = [r.data.metrics[key] for r in by_bs[row["params"][len("bs="):]]]
        half = t.ppf(0.975, 1) * statistics.stdev(values) / 2 ** 0.5
        assert abs(row["makespan_s"] - statistics.mean(values)) < 1e-9
        assert abs(row["makespan_s_ci95_high"] - row["makespan_s"] - half) < 1e-9
    assert rows[0]["makespan_s_within_noise"] is None and rows[1]["makespan_s_within_noise"] in (True, False)

    report = next(r for r in runs if r.data.tags.get("sweep.role") == "report")
    means = [r for r in runs if r.data.tags.get("sweep.role") == "setting"]
    assert len(means) == 2
    for m in means:
        assert m.data.tags["mlflow.parentRunId"] == report.info.run_id and m.info.status == "FINISHED"
        group = by_bs[m.data.tags["sweep.param.bs"]]
        assert m.data.metrics["repeats/n"] == 2
        assert abs(m.data.metrics[key] - statistics.mean(r.data.metrics[key] for r in group)) < 1e-9
        assert m.data.metrics["repeats/makespan_s_ci95_low"] <= m.data.metrics[key]
        assert sorted(m.data.tags["sweep.setting_runs"].split(",")) == sorted(r.info.run_id for r in group)
    page = client.download_artifacts(report.info.run_id, "radt_ext_sweep_report.html", str(tmp_path))
    assert "Repeated settings" in open(page, encoding="utf-8").read()

    again = radt("sweep", str(path), timeout=900)  # everything done: a resume reads the figures back
    assert again.returncode == 0, again.stderr[-3000:]
    lines = again.stderr.splitlines()
    header = next(ln for ln in lines if ln.startswith("#") and "avg SM active %" in ln)
    assert "makespan s" in header and "status" in header and max(len(ln) for ln in lines) > 80  # whole, not cut
    row = next(ln for ln in lines if ln.startswith("0,1 ") or ln.startswith("0,2 "))
    assert "2 SKIPPED" in row and row.count("±") >= 2
    assert len([r for r in client.search_runs([exp], max_results=1000)
                if r.data.tags.get("sweep.role") == "setting"]) == 2  # updated, not made again
