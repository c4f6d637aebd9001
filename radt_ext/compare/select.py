"""Which runs to compare: run ids, an experiment, a filter on tags — and which is the baseline."""
from __future__ import annotations

from collections import Counter

from mlflow.exceptions import MlflowException

from radt_ext.errors import UsageError
from radt_ext.store.client import runs_by_id

MAX_RUNS = 500


def _experiment_ids(client, experiment: str | None) -> list[str]:
    if experiment is None:
        return [e.experiment_id for e in client.search_experiments(max_results=10000)]
    found = client.get_experiment_by_name(experiment)
    if found is None and experiment.isdigit():
        try:
            found = client.get_experiment(experiment)
        except MlflowException:
            found = None
    if found is None:
        raise UsageError(f"no experiment named {experiment!r} (nor with that id); "
                         "`mlflow experiments search` lists them")
    return [found.experiment_id]


def select_runs(client, run_ids=(), experiment: str | None = None, filter_string: str | None = None) -> list:
    """The runs asked for, in the order given (ids) or oldest first (searches)."""
    if run_ids:
        runs = runs_by_id(client, run_ids)
        if filter_string or experiment:
            keep = {r.info.run_id for r in _search(client, _experiment_ids(client, experiment), filter_string)}
            runs = [r for r in runs if r.info.run_id in keep]
    else:
        if experiment is None and filter_string is None:
            raise UsageError("nothing to compare; give run ids, --experiment NAME or --filter "
                             "\"tags.variant = 'amp'\"")
        runs = _search(client, _experiment_ids(client, experiment), filter_string)
    if not runs:
        raise UsageError("no run matches; check the run ids, --experiment and --filter")
    return runs


def _search(client, experiment_ids: list[str], filter_string: str | None) -> list:
    try:
        return client.search_runs(experiment_ids, filter_string=filter_string or "",
                                  order_by=["attributes.start_time ASC"], max_results=MAX_RUNS)
    except MlflowException as exc:
        first = (str(exc.message if hasattr(exc, "message") else exc).strip().splitlines() or [""])[0]
        raise UsageError(f"--filter {filter_string!r} is not valid MLflow search syntax ({first[:200]}); "
                         "write e.g. \"tags.variant = 'amp' and metrics.`summary/e2e_duration_s` < 60\"") from None


def pick_baseline(client, runs: list, baseline: str | None):
    """(baseline run, how it was chosen). --baseline wins; else the run the compared runs name
    in their baseline_run_id tag (the most common one); else the first run."""
    if baseline:
        for r in runs:
            if r.info.run_id == baseline or r.info.run_id.startswith(baseline) and len(baseline) >= 6:
                return r, "--baseline"
        try:
            return client.get_run(baseline), "--baseline"
        except MlflowException:
            raise UsageError(f"--baseline {baseline!r} is not a run in this tracking store; give a run id") from None
    named = Counter(r.data.tags["baseline_run_id"] for r in runs if r.data.tags.get("baseline_run_id"))
    for run_id, _ in named.most_common():
        for r in runs:
            if r.info.run_id == run_id:
                return r, "tag baseline_run_id"
        try:
            return client.get_run(run_id), "tag baseline_run_id"
        except MlflowException:
            continue
    return runs[0], "first run"
