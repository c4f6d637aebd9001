"""The sweep's plotly report (time vs energy with the Pareto front, throughput and J/sample per
variant and mode, slowdown heatmap), kept on one run of its own per sweep: run name
"<sweep id>: sweep report", tags `sweep.id` and `sweep.role=report`, in the sweep's experiment.
Every `radt-ext sweep` call (a resume too) rebuilds it from all the sweep's runs in the store.
"""
from __future__ import annotations

from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME

from radt_ext.report import log_sweep_report
from radt_ext.store.client import experiment_id_for

ROLE_TAG = "sweep.role"
ROLE = "report"
ARTIFACT = "radt_ext_sweep_report.html"


def report_run(client, sweep_id: str, experiment: str) -> str:
    """The sweep's report run: the one made before, else a new one."""
    experiment_id = experiment_id_for(client, experiment)
    found = client.search_runs([experiment_id], f"tags.`sweep.id` = '{sweep_id}' and tags.`{ROLE_TAG}` = '{ROLE}'",
                               order_by=["attributes.start_time DESC"], max_results=1)
    if found:
        return found[0].info.run_id
    name = f"{sweep_id}: sweep report"
    run = client.create_run(experiment_id, tags={MLFLOW_RUN_NAME: name, "sweep.id": sweep_id, ROLE_TAG: ROLE},
                            run_name=name)
    return run.info.run_id


def log(client, sweep_id: str, experiment: str) -> tuple[str | None, str | None]:
    """(report run id, artifact path or None when building failed: see its radt_ext.report_error tag).
    Never raises: a report must not fail a sweep whose groups ran."""
    try:
        run_id = report_run(client, sweep_id, experiment)
    except Exception:
        return None, None
    path = log_sweep_report(client, run_id, sweep_id, ARTIFACT)
    try:
        client.set_terminated(run_id, "FINISHED")
    except Exception:
        pass
    return run_id, path
