"""Which runs are repeats of one setting (the statistics over repeats in `radt-ext compare`, the
sweep's results table and its report).

- A sweep's group run: the same sweep and content but the repeat (tag `sweep.setting`: commands, env,
  mode, place — a pooled variant's is the pool, whichever device it landed on —, listeners); a run
  whose variant was edited since is another setting. Runs recorded before that tag: the same sweep,
  group, mode, place and parameter values (tags `sweep.*`).
- A workload's run inside a sweep's group: the same sweep, mode, workload content
  (`sweep.workload_hash`: command, device, environment) and name in the group.
- Any other run: the same command (`radt_ext.command`), parameters, `variant` / `recipe` tags and
  collocation mode and workload; its name does not count (MLflow names each run anew).

Runs of one setting in another experiment are another setting.
"""
from __future__ import annotations

PARAM_TAG = "sweep.param."
ROLE_TAG = "sweep.role"  # a sweep's own runs (its report, its setting means): never a setting's repeat


def setting_of(experiment_id: str, tags: dict[str, str], params: dict[str, str]) -> tuple:
    """The setting a run (its experiment, tags and params) stands for; runs with equal settings are repeats."""
    if tags.get("sweep.id") and tags.get("sweep.setting"):
        return ("sweep", experiment_id, tags["sweep.id"], tags["sweep.setting"])
    if tags.get("sweep.id") and tags.get("sweep.group"):
        place = tags.get("sweep.place") or tags.get("collocation.gpu")
        swept = tuple(sorted((k[len(PARAM_TAG):], v) for k, v in tags.items() if k.startswith(PARAM_TAG)))
        return ("sweep", experiment_id, tags["sweep.id"], tags["sweep.group"], tags.get("collocation.mode"), place,
                swept)
    if tags.get("sweep.id") and tags.get("sweep.workload_hash"):
        return ("sweep workload", experiment_id, tags["sweep.id"], tags.get("collocation.mode"),
                tags["sweep.workload_hash"], tags.get("collocation.workload"))
    return ("run", experiment_id, tags.get("radt_ext.command"), tags.get("variant"), tags.get("recipe"),
            tags.get("collocation.mode"), tags.get("collocation.workload"), tuple(sorted(params.items())))


def of_run(run) -> tuple:
    return setting_of(run.info.experiment_id, dict(run.data.tags), dict(run.data.params))


def group_runs(runs: list) -> list[list]:
    """The runs in settings, in the order each setting first appears; a setting's runs in their order."""
    groups: dict[tuple, list] = {}
    for run in runs:
        if run.data.tags.get(ROLE_TAG):
            groups.setdefault(("own", run.info.run_id), []).append(run)
        else:
            groups.setdefault(of_run(run), []).append(run)
    return list(groups.values())
