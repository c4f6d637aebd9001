"""`radt-ext compact`: runs recorded at the full rate rewritten into the store's bounded shape.

For each chosen run that has ended: its `system/*` points are read from the store; those the run's
timeline artifact does not hold yet are written to it first (`timelines/system.parquet`, or
`timelines/compacted.parquet` beside one the run already has) and read back to check; only then, in
one transaction, the run's `system/*` rows are replaced by their shape (store/shaper.py), the same
points a run recorded today stores. Summaries, tags, parameters and the workload's own metrics are
not touched. `--dry-run` says what would change and changes nothing.

It rewrites MLflow's tables, so it needs the store's database URI (SQLite or PostgreSQL), as
`radt-ext run`'s direct path does (bulk_metrics.py); the artifacts go wherever the runs' artifact
URIs point.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import click

from radt_ext.errors import UsageError

SYSTEM = "system/"


@dataclass
class Plan:
    run_id: str
    name: str
    rows: int  # system/* rows in the store now
    kept: int  # rows after
    to_artifact: int  # points the artifact does not hold yet
    artifact: str | None  # the file they go to
    reason: str | None = None  # why the run is left as it is

    @property
    def changes(self) -> bool:
        return self.reason is None and self.kept < self.rows


def _store(uri: str):
    """MLflow's SQL store behind a database URI; a one-line UsageError otherwise."""
    from radt_ext.store.store_probe import check_uri

    if uri.startswith(("http://", "https://", "databricks")):
        raise UsageError(f"compact rewrites the store's tables: give the database URI behind {uri} "
                         "(sqlite:///… or postgresql://…) in MLFLOW_TRACKING_URI or --tracking-uri")
    check_uri(uri)
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    from radt_ext.store.client import connect

    client = connect(uri)
    store = getattr(client._tracking_client, "store", None)
    if not isinstance(store, SqlAlchemyStore) or store.engine.dialect.name not in ("sqlite", "postgresql"):
        raise UsageError(f"compact works on SQLite and PostgreSQL stores; {uri} is neither")
    return client, store


def choose_runs(client, run_ids, experiment: str | None):
    """The runs to look at, or a one-line UsageError."""
    from mlflow.exceptions import MlflowException

    if bool(run_ids) == bool(experiment):
        raise UsageError("name the runs to compact: RUN_ID... or --experiment NAME (not both)")
    if run_ids:
        from radt_ext.store.client import runs_by_id

        return runs_by_id(client, run_ids)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        try:
            exp = client.get_experiment(experiment)
        except MlflowException:
            exp = None
    if exp is None:
        raise UsageError(f"experiment {experiment!r} is not in this store (name or id)")
    return client.search_runs([exp.experiment_id], max_results=50_000, order_by=["attributes.start_time ASC"])


def _rows(store, run_id: str) -> list[tuple[str, float, int, int]]:
    from sqlalchemy import and_, select

    from radt_ext.store.bulk_metrics import METRICS

    with store.engine.connect() as conn:
        result = conn.execute(
            select(METRICS.c.key, METRICS.c.value, METRICS.c.timestamp, METRICS.c.step, METRICS.c.is_nan)
            .where(and_(METRICS.c.run_uuid == run_id, METRICS.c.key.like(SYSTEM + "%")))
            .order_by(METRICS.c.key, METRICS.c.step, METRICS.c.timestamp))
        return [(k, float("nan") if nan else float(v), int(t), int(s)) for k, v, t, s, nan in result]


def _ident(key: str, t: int, step: int, value: float) -> tuple:
    """A point as a set member (NaN equal to NaN)."""
    return key, int(t), int(step), value if value == value else "nan"


def plan_run(client, store, run, timelines) -> tuple[Plan, list, list]:
    """(the plan, the run's rows, the rows kept)."""
    from radt_ext.store import timelines as tl

    info = run.info
    plan = Plan(info.run_id, run.data.tags.get("mlflow.runName") or info.run_name or "", 0, 0, 0, None)
    if info.status == "RUNNING":
        plan.reason = "still running"
        return plan, [], []
    rows = _rows(store, info.run_id)
    plan.rows = len(rows)
    if not rows:
        plan.reason = "no system/* points"
        return plan, [], []
    from radt_ext.store.shaper import shape

    kept = shape(rows)
    plan.kept = len(kept)
    if plan.kept >= plan.rows:
        plan.reason = "already in shape"
        return plan, rows, kept
    held = {_ident(key, t, s, v) for key, points in (timelines or {}).items() for t, s, v in points}
    missing = [r for r in rows if _ident(r[0], r[2], r[3], r[1]) not in held]
    plan.to_artifact = len(missing)
    if missing:
        plan.artifact = f"{tl.ARTIFACT_DIR}/{tl.COMPACTED_FILE if timelines else tl.SYSTEM_FILE}"
    return plan, rows, kept


def _artifact_first(client, plan: Plan, rows) -> None:
    """The points the artifact lacks, written and read back before any row is touched."""
    from radt_ext.store import timelines as tl

    tl.log_points(client, plan.run_id, ((k, t, s, v) for k, v, t, s in rows), os.path.basename(plan.artifact))
    back = tl.read(client, plan.run_id) or {}
    found = {_ident(k, t, s, v) for k, points in back.items() for t, s, v in points}
    lost = len({_ident(k, t, s, v) for k, v, t, s in rows} - found)
    if lost:
        raise RuntimeError(f"{lost} points are not in the timeline artifact after writing it")


def _replace_rows(store, run_id: str, kept) -> None:
    from sqlalchemy import and_, delete

    from radt_ext.store.bulk_metrics import METRICS, BulkMetricInserter

    rows = [{"run_uuid": run_id, "key": k, "value": store.sanitize_metric_value(v)[1], "timestamp": t,
             "step": s, "is_nan": store.sanitize_metric_value(v)[0]} for k, v, t, s in kept]
    inserter = BulkMetricInserter(store, run_id)
    with store.engine.begin() as conn:
        conn.execute(delete(METRICS).where(and_(METRICS.c.run_uuid == run_id, METRICS.c.key.like(SYSTEM + "%"))))
        for i in range(0, len(rows), 10_000):
            conn.execute(inserter._insert_points, rows[i:i + 10_000])
        # the latest values do not move: the shape keeps every metric's last point


@click.command()
@click.argument("run_ids", nargs=-1)
@click.option("--experiment", "-e", default=None, help="every ended run of this experiment (name or id)")
@click.option("--tracking-uri", default=None, help="the store's database URI (default: MLFLOW_TRACKING_URI)")
@click.option("--dry-run", is_flag=True, help="say what would change; change nothing")
@click.option("--vacuum", is_flag=True, help="SQLite: give the freed pages back to the file system afterwards")
def compact(run_ids, experiment, tracking_uri, dry_run, vacuum):
    """Rewrite runs recorded at the full rate into the store's bounded shape (their full-rate points
    go to each run's timeline artifact first)."""
    from rich.console import Console
    from rich.table import Table

    from radt_ext.store.client import tracking_uri as default_uri
    from radt_ext.store import timelines as tl
    from radt_ext.store.shaper import BUCKET_S, FAST_BUCKET_S

    uri = default_uri(tracking_uri)
    client, store = _store(uri)
    runs = choose_runs(client, run_ids, experiment)
    if vacuum and store.engine.dialect.name != "sqlite":
        raise UsageError("--vacuum is for SQLite stores (PostgreSQL's autovacuum reuses the space)")
    table = Table("run", "name", "system rows now", "after", "to the artifact", "note")
    work = []
    for run in runs:
        timelines = tl.read(client, run.info.run_id)
        plan, rows, kept = plan_run(client, store, run, timelines)
        note = plan.reason or (f"→ {plan.artifact}" if plan.artifact else "artifact holds them")
        table.add_row(plan.run_id[:8], plan.name[:40], f"{plan.rows:,}", f"{plan.kept:,}" if plan.changes else "–",
                      f"{plan.to_artifact:,}", note)
        if plan.changes:
            work.append((plan, rows, kept))
    console = Console(width=140)
    console.print(table)
    before, after = sum(p.rows for p, _, _ in work), sum(p.kept for p, _, _ in work)
    shape_text = f"min/max per {FAST_BUCKET_S:g} s for GPU power, per {BUCKET_S:g} s otherwise"
    if dry_run:
        console.print(f"dry run: {len(work)} of {len(runs)} runs would go from {before:,} to {after:,} system rows "
                      f"({shape_text}); nothing changed", highlight=False)
        return
    done = 0
    for plan, rows, kept in work:
        try:
            if plan.to_artifact:
                _artifact_first(client, plan, rows)
            _replace_rows(store, plan.run_id, kept)
            client.set_tag(plan.run_id, "radt_ext.store_shape", shape_tag_text())
            done += 1
        except Exception as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            console.print(f"run {plan.run_id}: left as it was ({type(exc).__name__}: {text})", highlight=False)
    if vacuum:
        with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM")
    console.print(f"compacted {done} of {len(work)} runs: {before:,} → {after:,} system rows ({shape_text})"
                  + ("" if vacuum or store.engine.dialect.name != "sqlite" else
                     "; the file keeps its size until `radt-ext compact --vacuum` or sqlite3 VACUUM"),
                  highlight=False)


def shape_tag_text() -> str:
    from radt_ext.store.run_points import shape_tag

    return shape_tag(False)
