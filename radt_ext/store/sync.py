"""`radt-ext sync`: replay spooled points, tags and run status into their tracking stores, then log the
timeline files runs' ends could not store as those runs' artifacts.

Idempotent: points the store already holds (same key, timestamp, step and value)
are skipped, so a sync that was interrupted half-way, or a batch that reached the
store after the writer gave up on it, is never stored twice. A spool file is
renamed before it is read, so a run still appending to it starts a fresh file
instead of losing lines; a file whose store still refuses is put back.
"""
from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import click
from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from radt_ext.store.client import named_experiment_id, unreachable
from radt_ext.store.writer import MAX_BATCH, MAX_TAGS, first_line, spool_dir

REPLAYING = ".replaying"


TAG_SPOOL_ID = "radt_ext.spool_run_id"  # on a run made by sync: the name the spool gave it
TAG_TIMELINES_ERROR = "radt_ext.timelines_error"  # why a run's end could not store its timeline file


@dataclass
class RunSpool:
    metrics: list[Metric] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    status: tuple[str, int] | None = None  # (status, end_time ms)
    made: dict | None = None  # a run the store never saw: {experiment_id, run_name, start_time, tags, params}


@dataclass
class Result:
    stored: int = 0  # points sent to the store now
    skipped: int = 0  # points the store already had
    tags: int = 0
    statuses: int = 0
    bad_lines: int = 0
    made: list[str] = field(default_factory=list)  # runs made in the store for spooled ones


def read_spool(path: Path) -> tuple[dict[tuple[str, str], RunSpool], int]:
    """{(tracking_uri, run_id): RunSpool}, and the number of unreadable lines (cut short by a crash)."""
    runs: dict[tuple[str, str], RunSpool] = defaultdict(RunSpool)
    bad = 0
    with open(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                run = runs[(str(r["tracking_uri"]), str(r["run_id"]))]
                kind = r.get("kind", "metric")
                if kind == "metric":
                    run.metrics.append(Metric(str(r["key"]), float(r["value"]), int(r["timestamp"]), int(r["step"])))
                elif kind == "tag":
                    run.tags[str(r["key"])] = str(r["value"])
                elif kind == "status":
                    run.status = (str(r["status"]), int(r["end_time"]))
                elif kind == "run":
                    name = r.get("experiment_name")  # an experiment still to be made when the run was spooled
                    run.made = {"experiment_id": str(r["experiment_id"]) if r.get("experiment_id") else
                                (None if name else "0"), "experiment_name": name, "run_name": r.get("run_name"),
                                "start_time": int(r["start_time"]), "tags": dict(r.get("tags") or {}),
                                "params": dict(r.get("params") or {})}
                else:
                    bad += 1
            except (ValueError, KeyError, TypeError, AttributeError):
                bad += 1
    return runs, bad


def check_reachable(uri: str) -> None:
    """A server that does not answer /health fails at once, not after MLflow's minutes of retries."""
    down = unreachable(uri)
    if down:
        raise ConnectionError(f"tracking server {uri} does not answer ({down})")


def _point(m: Metric) -> tuple:
    return (m.key, m.timestamp, m.step, m.value)


def replay_run(client: MlflowClient, run_id: str, spool: RunSpool, result: Result) -> None:
    by_key: dict[str, list[Metric]] = defaultdict(list)
    for m in spool.metrics:
        by_key[m.key].append(m)
    todo: list[Metric] = []
    for key, metrics in by_key.items():
        have = {_point(m) for m in client.get_metric_history(run_id, key)}
        for m in metrics:
            p = _point(m)
            if p in have:
                result.skipped += 1
            else:
                have.add(p)  # a point spooled twice is sent once
                todo.append(m)
    for i in range(0, len(todo), MAX_BATCH):
        client.log_batch(run_id, metrics=todo[i:i + MAX_BATCH], synchronous=True)
        result.stored += len(todo[i:i + MAX_BATCH])
    tags = [RunTag(k, v) for k, v in spool.tags.items()]
    for i in range(0, len(tags), MAX_TAGS):
        client.log_batch(run_id, tags=tags[i:i + MAX_TAGS], synchronous=True)
    result.tags += len(tags)
    if spool.status:  # last: a run shows as ended only once its points are in
        client.set_terminated(run_id, spool.status[0], spool.status[1])
        result.statuses += 1


def made_run(client: MlflowClient, spool_id: str, made: dict, result: Result) -> str:
    """The store's run for a run spooled before the store could make it: made once, with the start
    time, tags and params it was spooled with, and found again by its tag on a later sync."""
    from mlflow.entities import Param, ViewType

    if made["experiment_id"] is None:
        made["experiment_id"] = named_experiment_id(client, made["experiment_name"])
    found = client.search_runs([made["experiment_id"]], f"tags.`{TAG_SPOOL_ID}` = '{spool_id}'",
                               run_view_type=ViewType.ALL, max_results=1)
    if found:
        return found[0].info.run_id
    tags = {**made["tags"], TAG_SPOOL_ID: spool_id}
    run = client.create_run(made["experiment_id"], start_time=made["start_time"], tags=tags,
                            run_name=made.get("run_name"))
    params = [Param(k, str(v)) for k, v in made["params"].items()]
    for i in range(0, len(params), MAX_TAGS):
        client.log_batch(run.info.run_id, params=params[i:i + MAX_TAGS], synchronous=True)
    result.made.append(run.info.run_id)
    return run.info.run_id


def replay(path: Path) -> Result:
    """Replay one spool file; it is removed only when everything in it is stored."""
    if path.name.endswith(REPLAYING):
        work = path  # left by a sync that was cut off
        original = path.with_name(path.name[: -len(REPLAYING)])
        result = Result()
    else:
        work = path.with_name(path.name + REPLAYING)
        original = path
        # a cut-off sync's file first: the rename would overwrite it
        result = replay(work) if work.exists() else Result()
        os.replace(path, work)
    try:
        runs, bad = read_spool(work)
        result.bad_lines += bad
        for (uri, run_id), spool in runs.items():
            check_reachable(uri)
            client = MlflowClient(tracking_uri=uri)
            if spool.made is not None:
                run_id = made_run(client, run_id, spool.made, result)
            replay_run(client, run_id, spool, result)
    except BaseException:
        _put_back(work, original)
        raise
    work.unlink()
    return result


def _put_back(work: Path, original: Path) -> None:
    """Return the lines to the spool file (appending: a live run may have started a new one)."""
    with open(work) as src, open(original, "a") as dst:
        dst.write(src.read())
    work.unlink()


def spool_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    plain = set(directory.glob("*.jsonl"))
    # X.jsonl.replaying is replayed along with X.jsonl when both are there
    left = {p for p in directory.glob(f"*.jsonl{REPLAYING}") if p.with_name(p.name[: -len(REPLAYING)]) not in plain}
    return sorted(plain | left)


def timeline_dirs(directory: Path) -> list[Path]:
    """Timeline files a run's end could not store, each in a folder with its target (run_points.TARGET)."""
    from radt_ext.store.run_points import TARGET

    return sorted(p.parent for p in (directory / "timelines").glob(f"*/{TARGET}"))


def _store_run(client: MlflowClient, run_id: str):
    """The store's run for a spooled id: the run itself, or the one sync made for a run spooled before the
    store could make it (found by its tag)."""
    from mlflow.entities import ViewType
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
        found = client.search_runs(experiments, f"tags.`{TAG_SPOOL_ID}` = '{run_id}'",
                                   run_view_type=ViewType.ALL, max_results=1)
        if not found:
            raise
        return found[0]


def send_timelines(folder: Path) -> int:
    """Log a spooled run's timeline files as its artifacts; the folder goes once they are in."""
    from radt_ext.store.run_points import TARGET
    from radt_ext.store.timelines import ARTIFACT_DIR

    target = json.loads((folder / TARGET).read_text())
    check_reachable(target["tracking_uri"])
    client = MlflowClient(tracking_uri=target["tracking_uri"])
    run = _store_run(client, target["run_id"])
    run_id = run.info.run_id
    files = sorted(folder.glob("*.parquet"))
    for path in files:
        client.log_artifact(run_id, str(path), ARTIFACT_DIR)
    if TAG_TIMELINES_ERROR in run.data.tags:  # it names a file that is the run's artifact now
        client.delete_tag(run_id, TAG_TIMELINES_ERROR)
    for path in [*files, folder / TARGET]:
        path.unlink()
    folder.rmdir()
    return len(files)


@click.command()
@click.option("--spool-dir", "directory", type=click.Path(path_type=Path), default=None,
              help="where spool files are (default: RADT_EXT_SPOOL_DIR or ~/.radt-ext/spool)")
def sync(directory):
    """Replay metrics, tags, run status and timeline files spooled while the tracking store was unreachable."""
    directory = directory or spool_dir()
    files = spool_files(directory)
    folders = timeline_dirs(directory)
    if not files and not folders:
        click.echo(f"nothing to sync in {directory}")
        return
    total = Result()
    kept = 0
    kept_timelines = 0
    for path in files:
        try:
            r = replay(path)
        except Exception as exc:  # the next files may name stores that answer
            kept += 1
            click.echo(f"Error: {path.name}: the store still refuses ({first_line(exc)[:300]}); "
                       "the spool file is kept, run `radt-ext sync` again later", err=True)
            continue
        total.stored += r.stored
        total.skipped += r.skipped
        total.bad_lines += r.bad_lines
        for run_id in r.made:
            click.echo(f"{path.name}: made run {run_id} (its samples were spooled before the store was reached)")
        extra = f", {r.skipped} already stored" if r.skipped else ""
        extra += f", {r.bad_lines} unreadable line(s) skipped" if r.bad_lines else ""
        click.echo(f"{path.name}: {r.stored} points stored{extra}, {r.tags} tags, "
                   f"{'status set' if r.statuses else 'no status'}")
    for folder in folders:  # a run's timeline artifact that its end could not store (after the
        # spool files: their replay makes the runs spooled before the store made them)
        try:
            sent = send_timelines(folder)
        except Exception as exc:
            kept_timelines += 1
            click.echo(f"Error: timelines of run {folder.name}: the store still refuses ({first_line(exc)[:300]}); "
                       "kept, run `radt-ext sync` again later", err=True)
            continue
        click.echo(f"timelines of run {folder.name}: {sent} file(s) logged as its artifact")
    click.echo(f"synced {total.stored} points from {len(files) - kept} file(s)"
               + (f" ({total.skipped} already stored)" if total.skipped else ""))
    if kept or kept_timelines:
        raise SystemExit(1)
