"""Store growth: rows a second and bytes per GPU-hour that one run puts into the tracking store, before
(every point the point filter passes, as radt-ext stored them before the store was shaped, and still
does with `--full-rate-store`) and after (the default shape, radt_ext/store/shaper.py), on SQLite and
on PostgreSQL.

    python -m benchmarks.store.store_growth --store sqlite:///RESULTS/mlflow.db --timelines RESULTS/system.parquet \
        --out docs/benchmarks/gpu/store_growth
    python -m benchmarks.store.store_growth --synthetic 600,1 --out docs/benchmarks/cpu/store_growth

Input: the store and the timeline artifact of one run recorded at default settings
(benchmarks/store/store_growth.sh). The run's full-rate points (the artifact) and its other rows (the
workload's own metrics, `summary/*`) are logged again into fresh stores — a SQLite file and a database
of a throwaway PostgreSQL cluster (tests/servers.py) — once through the old path (every point) and once
through the shape, by radt-ext's own direct insert (bulk_metrics.py, 10 000 points a transaction, as the
writer does). Bytes: the SQLite file's growth; PostgreSQL's `metrics` and `latest_metrics` tables with
their indexes. The run's own store gives the measured "after" too, and the energy check: the run's
summary energy against the energy of the full-rate series and of the stored shape.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from pathlib import Path

from benchmarks.common import fmt, table, write_results

SYSTEM = "system/"


def load_run(store_uri: str, run_id: str | None):
    """(run, its rows in the store [(key, value, ts, step)])."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store_uri)
    if run_id is None:
        db = store_uri[len("sqlite:///"):]
        with sqlite3.connect(db) as conn:
            run_id = conn.execute("SELECT run_uuid FROM metrics GROUP BY run_uuid ORDER BY COUNT(*) DESC LIMIT 1"
                                  ).fetchone()[0]
    run = client.get_run(run_id)
    store = client._tracking_client.store
    from sqlalchemy import select

    from radt_ext.store.bulk_metrics import METRICS

    with store.engine.connect() as conn:
        rows = [(k, float(v), int(t), int(s)) for k, v, t, s in conn.execute(
            select(METRICS.c.key, METRICS.c.value, METRICS.c.timestamp, METRICS.c.step)
            .where(METRICS.c.run_uuid == run_id))]
    return client, run, rows


def full_rate_points(timelines_path: str) -> list[tuple[str, float, int, int]]:
    from radt_ext.store.timelines import read_file

    return [(key, v, t, s) for key, points in read_file(timelines_path).items() for t, s, v in points]


def shaped(points) -> list[tuple[str, float, int, int]]:
    from radt_ext.store.shaper import shape

    return shape(sorted(points, key=lambda p: (p[0], p[3], p[2])))


class Point:
    __slots__ = ("key", "value", "timestamp", "step")

    def __init__(self, key, value, timestamp, step):
        self.key, self.value, self.timestamp, self.step = key, value, timestamp, step


def relog(uri: str, rows, size) -> dict:
    """Log `rows` into a fresh run of the store at `uri` by the writer's direct path; rows and bytes."""
    from mlflow.tracking import MlflowClient

    from radt_ext.store.bulk_metrics import BulkMetricInserter

    client = MlflowClient(uri)
    exp = client.create_experiment(f"store-growth-{time.time_ns()}")
    run = client.create_run(exp)
    bulk = BulkMetricInserter.for_client(client, run.info.run_id)
    before = size()
    start = time.perf_counter()
    points = [Point(*r) for r in sorted(rows, key=lambda r: r[2])]  # in time order, as a run writes them
    for i in range(0, len(points), 10_000):
        bulk.insert(points[i:i + 10_000])
    seconds = time.perf_counter() - start
    client.set_terminated(run.info.run_id, "FINISHED")
    bulk.engine.dispose()
    return {"rows": len(points), "bytes": size() - before, "insert_s": seconds}


def sqlite_case(rows) -> dict:
    with tempfile.TemporaryDirectory(prefix="radt-growth-") as tmp:
        db = os.path.join(tmp, "mlflow.db")
        uri = f"sqlite:///{db}"

        def size() -> int:
            with sqlite3.connect(db) as conn:  # pages in use (a fresh file has no free pages to reuse)
                return conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        return relog(uri, rows, size)


def postgres_case(pg, rows, name: str) -> dict:
    import psycopg2

    uri = pg.create_database(name)

    def size() -> int:
        conn = psycopg2.connect(host=pg.host, port=pg.port, user=pg.user, password=pg.password, dbname=name)
        try:
            with conn.cursor() as cur:
                try:
                    cur.execute("CHECKPOINT")
                except psycopg2.Error:
                    conn.rollback()
                cur.execute("SELECT COALESCE(pg_total_relation_size(to_regclass('metrics')), 0)"
                            " + COALESCE(pg_total_relation_size(to_regclass('latest_metrics')), 0)")
                return int(cur.fetchone()[0])
        finally:
            conn.close()
    return relog(uri, rows, size)


def log_cases(cases: dict[str, list], no_postgres: bool) -> dict[str, dict]:
    """Each case's rows logged into a fresh SQLite store and, unless no_postgres, a fresh PostgreSQL one."""
    out: dict[str, dict] = {"sqlite": {name: sqlite_case(rows) for name, rows in cases.items()}, "postgresql": {}}
    if not no_postgres:
        from tests.servers import start_postgres

        pg = start_postgres()
        try:
            for name, rows in cases.items():
                out["postgresql"][name] = postgres_case(pg, rows, f"growth_{name}")
        finally:
            pg.stop()
    return out


def energy_check(run, full, stored) -> dict:
    """The run's summary energy, against the energy of its full-rate and of its stored energy series."""
    from radt_ext.figures.energy import span_energy_j

    start, end = run.info.start_time / 1000.0, (run.info.end_time or 0) / 1000.0
    out = {"summary_j": run.data.metrics.get("summary/e2e_gpu_total_energy_j")}
    for name, points in (("full_rate_j", full), ("stored_j", stored)):
        total, found = 0.0, False
        for key in sorted({p[0] for p in points if p[0].startswith(SYSTEM) and p[0].endswith("_energy_j")
                           and p[0][len(SYSTEM):].startswith("gpu")}):
            series = sorted((t / 1000.0, v) for k, v, t, s in points if k == key)
            got = span_energy_j([t for t, _ in series], [v for _, v in series], float("-inf"), float("inf"))
            if got is not None:
                total += got[0] + series[0][1]  # the counter counts from the listener's open: from its first value
                found = True
        out[name] = total if found else None
    if out["summary_j"]:
        for name in ("full_rate_j", "stored_j"):
            if out[name] is not None:
                out[name.replace("_j", "_vs_summary_pct")] = 100.0 * (out[name] - out["summary_j"]) / out["summary_j"]
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="the run's store (sqlite:///…)")
    parser.add_argument("--timelines", help="the run's timelines/system.parquet")
    parser.add_argument("--synthetic", default=None, metavar="SECONDS,GPUS",
                        help="instead of a recorded run: a synthetic training run (benchmarks/store/synthetic_run.py)")
    parser.add_argument("--run-id", default=None, help="the run (default: the one with the most rows)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args(argv)
    if args.synthetic:
        return synthetic(args)
    if not (args.store and args.timelines):
        parser.error("give --store and --timelines of a recorded run, or --synthetic SECONDS,GPUS")

    client, run, stored_rows = load_run(args.store, args.run_id)
    full = full_rate_points(args.timelines)
    other = [r for r in stored_rows if not r[0].startswith(SYSTEM)]
    stored_system = [r for r in stored_rows if r[0].startswith(SYSTEM)]
    after_rows = shaped(full)
    seconds = ((run.info.end_time or 0) - run.info.start_time) / 1000.0
    gpus = int(run.data.metrics.get("summary/e2e_gpu_count") or run.data.metrics.get("summary/gpu_count") or 1)
    per = lambda rows: rows / seconds / gpus  # noqa: E731
    per_hour = lambda b: b / (seconds / 3600.0) / gpus  # noqa: E731
    own = [r for r in other if r[0].startswith("summary/")]  # radt-ext's rows beside its timelines
    cases = {"before": full + other, "after": after_rows + other,  # the run as a whole, the workload's own metrics too
             "before, radt-ext's rows": full + own, "after, radt-ext's rows": after_rows + own}
    results = {"run_id": run.info.run_id, "seconds": seconds, "gpus": gpus,
               "measured": {"rows": len(stored_rows), "system_rows": len(stored_system),
                            "rows_per_s_per_gpu": per(len(stored_rows)),
                            "shape_matches_store": len(after_rows) == len(stored_system)},
               **log_cases(cases, args.no_postgres)}
    results["energy"] = energy_check(run, full, after_rows)

    lines = ["### Store growth: one run, before (every point) and after (the shape)", "",
             f"One run of {seconds:.0f} s on {gpus} GPU(s) at default settings ({run.info.run_id[:8]}): "
             f"{len(full):,} full-rate system points in its timeline artifact, {len(stored_system):,} system rows "
             f"in its store ({len(stored_rows):,} rows in all: {len(stored_rows) - len(stored_system) - len(own):,} of them "
             f"the workload's own metrics). \"radt-ext's rows\": its timelines and `summary/*` alone.", ""]
    rows = []
    for backend in ("sqlite", "postgresql"):
        for name in cases:
            r = results[backend].get(name)
            if r:
                r["rows_per_s_per_gpu"] = per(r["rows"])
                r["mb_per_gpu_hour"] = per_hour(r["bytes"]) / 1e6
                r["bytes_per_row"] = r["bytes"] / r["rows"] if r["rows"] else float("nan")
                rows.append([backend, name, f"{r['rows']:,}", fmt(r["rows_per_s_per_gpu"]), fmt(r["mb_per_gpu_hour"]),
                             fmt(r["bytes_per_row"], 0)])
    lines.append(table(["store", "shape", "rows", "rows/s per GPU", "MB per GPU-hour", "bytes/row"], rows))
    e = results["energy"]
    lines += ["", f"Energy: summary {fmt(e.get('summary_j'))} J; "
              f"from the full-rate series {fmt(e.get('full_rate_j'))} J "
              f"({fmt(e.get('full_rate_vs_summary_pct'), 3)} %); from the stored shape {fmt(e.get('stored_j'))} J "
              f"({fmt(e.get('stored_vs_summary_pct'), 3)} %).",
              f"The shape computed here from the artifact has {len(after_rows):,} system rows; the run stored "
              f"{len(stored_system):,}."]
    write_results(args.out, "store_growth", results, "\n".join(lines))


def synthetic(args) -> None:
    """The same figures for a synthetic training run: its readings through the point filter are the
    full-rate points; no store of its own, no energy check."""
    from benchmarks.store.synthetic_run import points
    from radt_ext.store.point_filter import PointFilter

    seconds, gpus = (float(x) for x in args.synthetic.split(","))
    gpus = int(gpus)
    full = []
    kept = PointFilter(lambda k, v, t, s: full.append((k, v, t, s)))
    for key, value, t, step in points(seconds, gpus, time.time() - seconds):
        kept.add(key, value, t, step)
    kept.flush()
    cases = {"before": full, "after": shaped(full)}
    results = {"synthetic": {"seconds": seconds, "gpus": gpus}, **log_cases(cases, args.no_postgres)}
    rows = []
    for backend in ("sqlite", "postgresql"):
        for name in cases:
            r = results[backend].get(name)
            if r:
                r["rows_per_s_per_gpu"] = r["rows"] / seconds / gpus
                r["mb_per_gpu_hour"] = r["bytes"] / (seconds / 3600.0) / gpus / 1e6
                r["bytes_per_row"] = r["bytes"] / r["rows"] if r["rows"] else float("nan")
                rows.append([backend, name, f"{r['rows']:,}", fmt(r["rows_per_s_per_gpu"]), fmt(r["mb_per_gpu_hour"]),
                             fmt(r["bytes_per_row"], 0)])
    md = ["### Store growth: a synthetic run, before (every point) and after (the shape)", "",
          f"A synthetic training run of {seconds:g} s on {gpus} GPU(s) (benchmarks/store/synthetic_run.py: the default "
          f"listeners' metrics and rates, every metric noisy), {len(full):,} full-rate system points:", "",
          table(["store", "shape", "rows", "rows/s per GPU", "MB per GPU-hour", "bytes/row"], rows)]
    write_results(args.out, "store_growth", results, "\n".join(md))


if __name__ == "__main__":
    main()
