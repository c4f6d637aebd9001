"""Profiles on disk (a CSV table and a JSON of facts) and as MLflow runs.

One profile is one run: params (model, batch, precision, mode, GPU name, driver, ...), the
whole-network and summed-operation totals as metrics, and the per-operation table as the
artifact `ops.csv` (beside `profile.json`). A run is created only once the profile exists and
is deleted again when logging it fails part way, so the store never holds half a profile.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from radt_ext.errors import UsageError
from radt_ext.ops.profiler import COLUMNS, Profile, read_table

TAG = "radt_ext.ops"  # marks profile runs
PARAMS = ("model", "batch", "precision", "mode", "gpu_name", "driver", "device", "window_s", "torch",
          "energy_unavailable", "power_limit_w", "sm_count", "mem_bandwidth_gbs", "gpu_kind")


def write(folder: str | Path, name: str, profile: Profile) -> Path:
    """`<name>.csv` and `<name>.json` in `folder`, each renamed into place once complete."""
    folder = Path(folder)
    for suffix, put in ((".csv", lambda p: profile.table.to_csv(p, index=False)),
                        (".json", lambda p: p.write_text(json.dumps(profile.meta, indent=1, default=str)))):
        tmp = folder / (name + suffix + ".part")
        put(tmp)
        os.replace(tmp, folder / (name + suffix))
    return folder / (name + ".csv")


def read(csv: str | Path) -> Profile:
    """A profile from `<name>.csv` and its `<name>.json`."""
    csv = Path(csv)
    meta_path = csv.with_suffix(".json")
    if not csv.is_file() or not meta_path.is_file():
        raise UsageError(f"{csv} is not a profile: it needs {csv.name} and {meta_path.name} side by side")
    table = read_table(csv)
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise UsageError(f"{csv} is not a profile table: columns {', '.join(missing)} are missing")
    return Profile(table, json.loads(meta_path.read_text()))


def read_dir(folder: str | Path) -> list[Profile]:
    profiles = [read(p) for p in sorted(Path(folder).glob("*.csv"))]
    if not profiles:
        raise UsageError(f"no profiles (<name>.csv with <name>.json) in {folder}")
    return profiles


def totals(profile: Profile) -> dict[str, float]:
    """Metrics of a profile: the network and the sum of its operations, time and energy, per step."""
    out = {}
    for column, unit in (("time_ms", "ms"), ("energy_mj", "mj")):
        net, ops = profile.network(column), profile.ops_sum(column)
        out[f"network_{unit}"] = net
        out[f"ops_sum_{unit}"] = ops
        if net and not math.isnan(net) and not math.isnan(ops):
            out[f"ops_over_network_{unit}"] = ops / net
    table = profile.table[profile.table.op == "network"]
    for phase, row in table.set_index("phase").iterrows():
        out[f"network_{phase}_ms"] = float(row.time_ms)
        out[f"network_{phase}_mj"] = float(row.energy_mj)
        out[f"network_{phase}_w"] = float(row.power_w)
        out[f"network_{phase}_spread"] = float(row.spread)
        out[f"network_{phase}_energy_spread"] = float(row.energy_spread)
        out[f"network_{phase}_host_ms"] = float(row.host_ms)  # the host's time to issue one step
    for column, weight in (("spread", "time_ms"), ("energy_spread", "energy_mj")):
        if table[column].notna().any():  # how far the rounds disagreed, per step: a prediction's interval starts here
            w = table[weight].astype(float)
            out[f"network_{column}"] = float((table[column].fillna(0) * w).sum() / w.sum())
    return {k: v for k, v in out.items() if v is not None and not math.isnan(v)}


def log(profile: Profile, client, experiment_id: str, run_name: str | None = None) -> str:
    """Log one finished profile as a run; returns its id. On failure the run is deleted and the error raised."""
    from mlflow.entities import Metric, Param, RunTag

    meta = profile.meta
    params = [Param(k, str(meta[k])[:500]) for k in PARAMS if meta.get(k) is not None]
    name = run_name or f"{meta.get('model')}-b{meta.get('batch')}-{meta.get('precision')}-{meta.get('mode')}"
    run = client.create_run(experiment_id, run_name=name, tags={TAG: "profile"})
    run_id = run.info.run_id
    try:
        now = int(time.time() * 1000)
        client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in totals(profile).items()],
                         params=params, tags=[RunTag(f"{TAG}.gpu", str(meta.get("gpu_name", "")))])
        with tempfile.TemporaryDirectory() as tmp:
            profile.table.to_csv(Path(tmp) / "ops.csv", index=False)
            (Path(tmp) / "profile.json").write_text(json.dumps(meta, indent=1, default=str))
            client.log_artifacts(run_id, tmp)
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        client.delete_run(run_id)
        raise
    return run_id


def load_run(client, run_id: str) -> Profile:
    """The profile a run holds."""
    try:
        run = client.get_run(run_id)
    except Exception as exc:
        raise UsageError(f"no run {run_id} in the tracking store: {str(exc).splitlines()[0]}") from None
    if run.data.tags.get(TAG) != "profile":
        raise UsageError(f"run {run_id} is not an ops profile (it has no {TAG}=profile tag); "
                         "make one with radt-ext ops profile")
    with tempfile.TemporaryDirectory() as tmp:
        client.download_artifacts(run_id, "", tmp)
        table = read_table(Path(tmp) / "ops.csv")
        meta = json.loads((Path(tmp) / "profile.json").read_text())
    meta["run_id"] = run_id
    return Profile(table, meta)


def load_experiment(client, experiment_id: str) -> list[Profile]:
    """Every profile run of an experiment."""
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{TAG}` = 'profile'", max_results=10000)
    return [load_run(client, r.info.run_id) for r in runs]
