"""The sweep's plotly report (time vs energy with the Pareto front, throughput and J/sample per
variant and mode, slowdown heatmap, repeated settings' means and intervals), kept on one run of its
own per sweep: run name "<sweep id>: sweep report", tags `sweep.id` and `sweep.role=report`, in the
sweep's experiment. Every `radt-ext sweep` call (a resume too) rebuilds it from all the sweep's runs in
the store.

The means of a setting that ran more than once are runs too, under the report run (tags
`sweep.role=setting`, `sweep.setting`, the setting's `sweep.*` and `collocation.mode` tags): each
`summary/*` figure's mean under its own name, so the MLflow UI's runs table and charts show a setting's
mean beside its runs and beside the other settings, `repeats/<figure>_ci95_low` / `_ci95_high` (the 95 %
Student-t interval) and `repeats/n`. They are made once per setting and updated by each call.
"""
from __future__ import annotations

from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME

from radt_ext.report import data, log_sweep_report, tag_report_error
from radt_ext.store.client import experiment_id_for

ROLE_TAG = "sweep.role"
ROLE = "report"
SETTING_ROLE = "setting"
SETTING_TAG = "sweep.setting"  # a setting's key: its variants' content but the repeat (Variant.setting_hash)
REPEATS = "repeats/"
COPIED = ("sweep.id", "sweep.group", "sweep.place", "collocation.mode")  # the setting's tags its means carry
ARTIFACT = "radt_ext_sweep_report.html"


def sweep_runs(client, sweep_id: str) -> list:
    """Every run tagged with the sweep's id (its own report and means too), oldest first: read once for its
    report, its report run and its means."""
    return data.sweep_runs(client, sweep_id, every=True)


def _in(runs: list, experiment_id: str) -> list:
    return [r for r in runs if r.info.experiment_id == experiment_id]


def report_run(client, sweep_id: str, experiment: str, runs: list | None = None) -> str:
    """The sweep's report run: the one made before, else a new one. `runs`: sweep_runs' answer (else read)."""
    experiment_id = experiment_id_for(client, experiment)
    runs = sweep_runs(client, sweep_id) if runs is None else runs
    found = [r for r in reversed(_in(runs, experiment_id)) if r.data.tags.get(ROLE_TAG) == ROLE]
    if found:
        return found[0].info.run_id
    name = f"{sweep_id}: sweep report"
    run = client.create_run(experiment_id, tags={MLFLOW_RUN_NAME: name, "sweep.id": sweep_id, ROLE_TAG: ROLE},
                            run_name=name)
    return run.info.run_id


def log(client, sweep_id: str, experiment: str, runs: list | None = None) -> tuple[str | None, str | None]:
    """(report run id, artifact path or None when building failed: see its radt_ext.report_error tag).
    Never raises: a report must not fail a sweep whose groups ran. `runs`: sweep_runs' answer."""
    try:
        runs = sweep_runs(client, sweep_id) if runs is None else runs
        run_id = report_run(client, sweep_id, experiment, runs)
    except Exception:
        return None, None
    path = log_sweep_report(client, run_id, sweep_id, ARTIFACT, runs=data.variant_runs(runs))
    try:
        client.set_terminated(run_id, "FINISHED")
    except Exception:
        pass
    return run_id, path


def _setting_name(sweep_id: str, tags: dict[str, str], n: int) -> str:
    params = " ".join(f"{k[len('sweep.param.'):]}={v}" for k, v in sorted(tags.items()) if k.startswith("sweep.param."))
    what = " ".join(x for x in (tags.get("collocation.mode"), tags.get("sweep.group"), params) if x)
    return f"{sweep_id}: {what} (mean of {n})"


def log_setting_means(client, sweep_id: str, experiment: str, report_run_id: str, runs: list | None = None) -> int:
    """For each setting of the sweep with two or more FINISHED group runs, its means (see the module's
    account) on a run under the report run; returns how many settings. Never raises: the means must
    not fail a sweep whose groups ran (a failure is the report run's `radt_ext.report_error` tag).
    `runs`: sweep_runs' answer."""
    import time

    from mlflow.entities import Metric
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    from radt_ext.figures import repeats
    from radt_ext.report import settings
    from radt_ext.sweep.plan import digest

    try:
        experiment_id = experiment_id_for(client, experiment)
        runs = _in(sweep_runs(client, sweep_id) if runs is None else runs, experiment_id)
        made = {r.data.tags.get(SETTING_TAG): r.info.run_id for r in runs
                if r.data.tags.get(ROLE_TAG) == SETTING_ROLE}
        groups = [r for r in runs if r.info.status == "FINISHED" and r.data.tags.get("sweep.group")
                  and not r.data.tags.get(ROLE_TAG)]
        count = 0
        now = int(time.time() * 1000)
        for group in settings.group_runs(groups):
            if len(group) < 2:
                continue
            tags = dict(group[0].data.tags)
            key = tags.get(SETTING_TAG) or digest(settings.of_run(group[0]))[:24]
            metrics = [Metric(f"{REPEATS}n", float(len(group)), now, 0)]
            for name in sorted({k for r in group for k in r.data.metrics if k.startswith("summary/")}):
                est = repeats.estimate(r.data.metrics.get(name) for r in group)
                if est is None:
                    continue
                metrics.append(Metric(name, est.mean, now, 0))
                if est.half is not None:
                    figure = name[len("summary/"):]
                    metrics += [Metric(f"{REPEATS}{figure}_ci95_low", est.low, now, 0),
                                Metric(f"{REPEATS}{figure}_ci95_high", est.high, now, 0)]
            run_id = made.get(key)
            if run_id is None:
                name = _setting_name(sweep_id, tags, len(group))
                own = {k: v for k, v in tags.items() if k in COPIED or k.startswith("sweep.param.")}
                run_id = client.create_run(experiment_id, run_name=name, tags={
                    **own, MLFLOW_RUN_NAME: name, MLFLOW_PARENT_RUN_ID: report_run_id, ROLE_TAG: SETTING_ROLE,
                    SETTING_TAG: key}).info.run_id
            else:
                client.set_tag(run_id, MLFLOW_RUN_NAME, _setting_name(sweep_id, tags, len(group)))
            client.set_tag(run_id, "sweep.setting_runs", ",".join(r.info.run_id for r in group)[:5000])
            for i in range(0, len(metrics), 1000):
                client.log_batch(run_id, metrics=metrics[i:i + 1000])
            client.set_terminated(run_id, "FINISHED")
            count += 1
        return count
    except Exception as exc:
        tag_report_error(client, report_run_id, exc, "setting means: ")
        return 0
