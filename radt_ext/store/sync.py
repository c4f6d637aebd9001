"""`radt-ext sync`: replay spooled points, tags and run status into their tracking stores, then log the
timeline files runs' ends could not store as those runs' artifacts.

Idempotent: points the store already holds (same key, timestamp, step and value)
are skipped, so a sync that was interrupted half-way, or a batch that reached the
store after the writer gave up on it, is never stored twice. A spool file is
renamed before it is read, so a run still appending to it starts a fresh file
instead of losing lines; a file whose store is down (refused, timed out: store_fate.py) is put back and
the sync exits 1; one whose store is gone for good (its SQLite folder deleted, the run or experiment
deleted, 404) is set aside in the spool's gone/ folder and named, and the sync exits 0.
The spool's layout: spool.py; `radt-ext sync --list`: spool_list.py.
"""
from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import click
from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from radt_ext.store import store_fate
from radt_ext.store.client import named_experiment_id, unreachable
from radt_ext.store.spool import (GONE, REPLAYING, TARGET, entry_name, set_aside, spool_files,
                                  timeline_dirs, write_waiting)
from radt_ext.store.store_fate import Fate
from radt_ext.store.writer import MAX_BATCH, MAX_TAGS, spool_dir

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
    gone: dict[tuple[str, str], str] = field(default_factory=dict)  # (store, run): why it is gone; set aside
    down: dict[tuple[str, str], str] = field(default_factory=dict)  # (store, run): why it is down; kept


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


def replay(path: Path, directory: Path) -> Result:
    """Replay one spool file of `directory`; what is stored leaves it, a gone store's lines are set aside
    (spool.set_aside), a down store's are put back."""
    if path.name.endswith(REPLAYING):
        work = path  # left by a sync that was cut off
        original = path.with_name(path.name[: -len(REPLAYING)])
        result = Result()
    else:
        work = path.with_name(path.name + REPLAYING)
        original = path
        # a cut-off sync's file first: the rename would overwrite it
        result = replay(work, directory) if work.exists() else Result()
        if result.down:  # its lines are back in `path`, whose store is down: not tried twice
            return result
        os.replace(path, work)
    try:
        runs, bad = read_spool(work)
        result.bad_lines += bad
        for key, spool in runs.items():
            fate = _replay_run_of(key, spool, result)
            if fate is not None:
                (result.gone if fate.gone else result.down)[key] = fate.why
    except BaseException:
        _put_back(work, original)
        raise
    _settle(work, original, directory, runs, {k: why for k, why in result.gone.items() if k in runs},
            {k for k in result.down if k in runs})
    return result


def _replay_run_of(key: tuple[str, str], spool: RunSpool, result: Result) -> Fate | None:
    """Replay one run's lines; None when stored, else whether its store is gone or down, and why."""
    uri, run_id = key
    fate = store_fate.before_contact(uri, creates=spool.made is not None)
    if fate is not None:
        return fate
    try:
        check_reachable(uri)
        client = MlflowClient(tracking_uri=uri)
        if spool.made is not None:
            fate = store_fate.of_experiment(client, spool.made["experiment_id"])
            if fate is not None:
                return fate
            run_id = made_run(client, run_id, spool.made, result)
        fate = store_fate.of_run(client, client.get_run(run_id))
        if fate is not None:
            return fate
        replay_run(client, run_id, spool, result)
    except Exception as exc:  # the next runs may name stores that answer
        return store_fate.of_error(exc)
    return None


def _settle(work: Path, original: Path, directory: Path, runs, gone: dict[tuple[str, str], str],
            down: set[tuple[str, str]]) -> None:
    """Stored runs' lines go; a down store's lines are put back and a gone store's set aside in gone/ (the
    lines no run could read go with the first when there are any, else with the second)."""
    name = entry_name(directory, original)
    notes = [{"store": uri, "run": run_id, "why": why} for (uri, run_id), why in gone.items()]
    if not gone and not down:
        work.unlink()
    elif down == set(runs):
        _put_back(work, original)
    elif set(gone) == set(runs):
        set_aside(directory, work, name, notes)
    else:  # some runs of one file stored, down or gone
        aside, back = work.with_name(name + ".gone"), work.with_name(name + ".down")
        with open(work) as src, open(aside, "w") as out, open(back, "w") as keep:
            for line in src:
                key = _key(line)
                if key in down or (key is None and down):
                    keep.write(line)
                elif key in gone or key is None:
                    out.write(line)
        if back.stat().st_size:
            _put_back(back, original)
        else:
            back.unlink()
        if gone:
            set_aside(directory, aside, name, notes)
        else:
            aside.unlink()
        work.unlink()


def _key(line: str) -> tuple[str, str] | None:
    try:
        r = json.loads(line)
        return str(r["tracking_uri"]), str(r["run_id"])
    except (ValueError, KeyError, TypeError):
        return None


def _put_back(work: Path, original: Path) -> None:
    """Return the lines to the spool file (appending: a live run may have started a new one)."""
    with open(work) as src, open(original, "a") as dst:
        dst.write(src.read())
    work.unlink()


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


def send_timelines(folder: Path) -> int | Fate:
    """Log a spooled run's timeline files as its artifacts; the folder goes once they are in. The number of
    files logged, or the Fate of a store that did not take them (the folder is left as it is)."""
    from radt_ext.store.timelines import ARTIFACT_DIR

    target = json.loads((folder / TARGET).read_text())
    fate = store_fate.before_contact(target["tracking_uri"])
    if fate is not None:
        return fate
    try:
        check_reachable(target["tracking_uri"])
        client = MlflowClient(tracking_uri=target["tracking_uri"])
        run = _store_run(client, target["run_id"])
        fate = store_fate.of_run(client, run)
        if fate is not None:
            return fate
        run_id = run.info.run_id
        files = sorted(folder.glob("*.parquet"))
        for path in files:
            client.log_artifact(run_id, str(path), ARTIFACT_DIR)
        if TAG_TIMELINES_ERROR in run.data.tags:  # it names a file that is the run's artifact now
            client.delete_tag(run_id, TAG_TIMELINES_ERROR)
    except Exception as exc:
        return store_fate.of_error(exc)
    for path in [*files, folder / TARGET]:
        path.unlink()
    folder.rmdir()
    return len(files)


@click.command()
@click.option("--spool-dir", "directory", type=click.Path(path_type=Path), default=None,
              help="where spool files are (default: RADT_EXT_SPOOL_DIR or ~/.radt-ext/spool)")
@click.option("--list", "show", is_flag=True,
              help="list what waits and why, and what was set aside as gone; contact no store")
def sync(directory, show):
    """Replay metrics, tags, run status and timeline files spooled while the tracking store was unreachable.
    Entries whose store is gone for good are set aside in the spool's gone/ folder."""
    directory = directory or spool_dir()
    if show:
        from radt_ext.store.spool_list import show_spool

        show_spool(directory)
        return
    files = spool_files(directory)
    folders = timeline_dirs(directory)
    if not files and not folders:
        click.echo(f"nothing to sync in {directory}")
        return
    total = Result()
    waiting: dict[str, dict] = {}
    now = time.time()
    kept = aside = 0
    for path in files:
        name = entry_name(directory, path)
        r = replay(path, directory)
        total.stored += r.stored
        total.skipped += r.skipped
        total.bad_lines += r.bad_lines
        for run_id in r.made:
            click.echo(f"{name}: made run {run_id} (its samples were spooled before the store was reached)")
        for (uri, run_id), why in r.gone.items():
            _say_gone(directory, name, uri, run_id, why)
        for (uri, run_id), why in r.down.items():
            waiting[name] = {"why": why, "at": now}
            click.echo(f"Error: {name}: the store {uri} is down ({why}); the spool file is kept, "
                       "run `radt-ext sync` again later", err=True)
        if r.down or (r.gone and not (r.stored or r.skipped or r.tags or r.statuses)):
            kept += bool(r.down)
            aside += not r.down
            continue
        extra = f", {r.skipped} already stored" if r.skipped else ""
        extra += f", {r.bad_lines} unreadable line(s) skipped" if r.bad_lines else ""
        click.echo(f"{name}: {r.stored} points stored{extra}, {r.tags} tags, "
                   f"{'status set' if r.statuses else 'no status'}")
    for folder in folders:  # a run's timeline artifact that its end could not store (after the
        # spool files: their replay makes the runs spooled before the store made them)
        name = entry_name(directory, folder)
        target = json.loads((folder / TARGET).read_text())
        sent = send_timelines(folder)
        if not isinstance(sent, Fate):
            click.echo(f"timelines of run {folder.name}: {sent} file(s) logged as its artifact")
        elif sent.gone:
            set_aside(directory, folder, name, [{"store": target["tracking_uri"], "run": target["run_id"],
                                                 "why": sent.why}])
            _say_gone(directory, name, target["tracking_uri"], target["run_id"], sent.why)
        else:
            waiting[name] = {"why": sent.why, "at": now}
            click.echo(f"Error: timelines of run {folder.name}: the store {target['tracking_uri']} is down "
                       f"({sent.why}); kept, run `radt-ext sync` again later", err=True)
    click.echo(f"synced {total.stored} points from {len(files) - kept - aside} file(s)"
               + (f" ({total.skipped} already stored)" if total.skipped else ""))
    write_waiting(directory, waiting)
    if waiting:
        raise SystemExit(1)


def _say_gone(directory: Path, name: str, uri: str, run_id: str, why: str) -> None:
    click.echo(f"set aside: {name} → {directory / GONE / name}: the store {uri} is gone for run {run_id} ({why})")
