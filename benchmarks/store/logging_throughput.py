"""Logging throughput: metric points per second from radt-ext's MetricWriter into MLflow stores.

    python -m benchmarks.store.logging_throughput --out docs/benchmarks/cpu

Stores: a local SQLite file, and a local `mlflow server` (on SQLite, 127.0.0.1, one worker)
started by `tests/servers.py`. For each store:
  - ceiling: `MlflowClient.log_batch` with 1000 metrics per call, back to back (what the store
    takes without radt-ext in the way);
  - writer: N points handed to the real `radt_ext.store.writer.MetricWriter` as fast as possible,
    timed until `close()` returned (every point stored), with the writer's CPU (the process's
    CPU less the producing main thread's: the writer's own threads and `close()`). Into SQLite the
    writer inserts directly into MLflow's tables (`radt_ext/store/bulk_metrics.py`); it is measured again
    with `bulk=False`, i.e. through `log_batch` as into a server.
  - SQLite only, for reference (not a radt-ext path): the same number of rows inserted straight into
    MLflow's `metrics` table with sqlite3 `executemany`, to show what the file takes without MLflow's ORM.
Then, into SQLite:
  - one synthetic hour at 10 Hz × 30 metrics (1 080 000 points with timestamps spanning the
    hour) through the writer, read back with `get_metric_history` and checked point by point;
  - paced: 30 metrics every 0.1 s in real time for a while, the writer flushing every second
    as it does in a run; the writer's CPU share is the cost of an hour of monitoring.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from benchmarks.common import fmt, table, write_results

METRICS = 30
RATE_HZ = 10


def _thread_cpu(native_id: int) -> float:
    for t in psutil.Process().threads():
        if t.id == native_id:
            return t.user_time + t.system_time
    return 0.0


def _main_cpu() -> float:
    return _thread_cpu(threading.main_thread().native_id)


def _cpu() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


def key(i: int) -> str:
    return f"system/bench_metric_{i:02d}_pct"


def ceiling(client, experiment_id: str, batches: int) -> dict:
    from mlflow.entities import Metric

    run_id = client.create_run(experiment_id, run_name="ceiling").info.run_id
    now = int(time.time() * 1000)
    start, c0 = time.perf_counter(), _cpu()
    for b in range(batches):
        client.log_batch(run_id, metrics=[Metric(key(j % METRICS), float(j), now + b * 100 + j // METRICS, b)
                                          for j in range(1000)], synchronous=True)
    wall, cpu = time.perf_counter() - start, _cpu() - c0
    return {"points": batches * 1000, "seconds": wall, "points_per_s": batches * 1000 / wall,
            "client_cpu_s": cpu}


def raw_sqlite_reference(db_path: str, run_id: str, points: int) -> dict:
    """Reference only, not a radt-ext path: rows straight into MLflow's `metrics` table with sqlite3
    executemany, 1000 per transaction, i.e. what the SQLite file takes without MLflow's ORM."""
    import sqlite3

    now = int(time.time() * 1000)
    rows = [(key(j % METRICS), float(j), now + j // METRICS * 100, run_id, j // METRICS * 100, 0)
            for j in range(points)]
    con = sqlite3.connect(db_path)
    try:
        start = time.perf_counter()
        for i in range(0, points, 1000):
            with con:
                con.executemany("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                                "VALUES (?, ?, ?, ?, ?, ?)", rows[i:i + 1000])
        wall = time.perf_counter() - start
    finally:
        con.close()
    return {"points": points, "seconds": wall, "points_per_s": points / wall}


def writer_flood(client, uri: str, experiment_id: str, points: int, name: str, bulk: bool = True) -> dict:
    """`points` points into a real MetricWriter as fast as they can be added; timed until close()."""
    from radt_ext.store.writer import MetricWriter

    run_id = client.create_run(experiment_id, run_name=name).info.run_id
    writer = MetricWriter(client, run_id, uri, bulk=bulk).start()
    t0_ms = int(time.time() * 1000)
    start, c0, m0 = time.perf_counter(), _cpu(), _main_cpu()
    for n in range(points):
        tick, i = divmod(n, METRICS)
        writer.add(key(i), float(n % 1000), t0_ms + tick * 1000 // RATE_HZ, tick * 1000 // RATE_HZ)
    added, producer_cpu = time.perf_counter() - start, _main_cpu() - m0
    writer.close(timeout=3600)
    wall = time.perf_counter() - start
    cpu = _cpu() - c0
    # the writer's CPU: the whole process but the producer loop (its threads, incl. per-call helpers, and close())
    return {"run_id": run_id, "points": points, "stored": writer.stored, "spooled": writer.spooled,
            "seconds": wall, "add_seconds": added, "points_per_s": writer.stored / wall,
            "writer_cpu_s": cpu - producer_cpu, "producer_cpu_s": producer_cpu, "process_cpu_s": cpu,
            "errors": writer.errors[-3:]}


def read_back(client, run_id: str, points: int) -> dict:
    """Every point of the run's metrics, compared with what writer_flood() wrote."""
    start = time.perf_counter()
    expected_per_key = points // METRICS
    missing = wrong = 0
    total = 0
    for i in range(METRICS):
        history = client.get_metric_history(run_id, key(i))
        total += len(history)
        got = {(m.step, m.value) for m in history}
        want = {((n // METRICS) * 1000 // RATE_HZ, float(n % 1000)) for n in range(i, points, METRICS)}
        missing += len(want - got)
        wrong += len(got - want)
    return {"points_read": total, "expected": expected_per_key * METRICS, "missing": missing,
            "unexpected": wrong, "complete": missing == 0 and wrong == 0 and total == points,
            "seconds": time.perf_counter() - start}


def paced(client, uri: str, experiment_id: str, seconds: float) -> dict:
    """30 metrics every 0.1 s in real time; CPU of the writer thread while it flushes every second."""
    from radt_ext.store.writer import MetricWriter

    run_id = client.create_run(experiment_id, run_name="paced").info.run_id
    writer = MetricWriter(client, run_id, uri).start()
    t0 = time.time()
    start, c0, m0 = time.perf_counter(), _cpu(), _main_cpu()
    tick = 0
    while time.perf_counter() - start < seconds:
        now_ms = int(time.time() * 1000)
        for i in range(METRICS):
            writer.add(key(i), float(tick), now_ms, now_ms - int(t0 * 1000))
        tick += 1
        time.sleep(max(0.0, start + tick / RATE_HZ - time.perf_counter()))
    wall = time.perf_counter() - start
    writer_cpu = (_cpu() - c0) - (_main_cpu() - m0)  # everything but the producer (main) thread
    writer.close()
    return {"seconds": wall, "points": writer.sent, "stored": writer.stored,
            "writer_cpu_s": writer_cpu, "writer_cpu_pct_of_core": 100.0 * writer_cpu / wall}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000, help="points for the SQLite writer test")
    ap.add_argument("--log-batch-points", type=int, default=30_000,
                    help="points for the SQLite writer forced through log_batch")
    ap.add_argument("--server-points", type=int, default=20_000)
    ap.add_argument("--ceiling-batches", type=int, default=50)
    ap.add_argument("--hour-seconds", type=int, default=3600, help="synthetic seconds at 10 Hz x 30 metrics")
    ap.add_argument("--paced-seconds", type=float, default=30.0)
    ap.add_argument("--no-server", action="store_true")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)

    from mlflow.tracking import MlflowClient

    work = Path(tempfile.mkdtemp(prefix="radt-bench-log-"))
    os.environ["RADT_EXT_SPOOL_DIR"] = str(work / "spool")
    results: dict = {"stores": {}}
    stores = [("sqlite", f"sqlite:///{work / 'mlflow.db'}", args.points, args.ceiling_batches)]
    server = None
    if not args.no_server:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.servers import start_mlflow_server

        server = start_mlflow_server(f"sqlite:///{work / 'server.db'}", work / "server")
        stores.append(("mlflow server (SQLite, 1 worker)", server.url, args.server_points,
                       max(5, args.ceiling_batches // 5)))
    try:
        for name, uri, points, batches in stores:
            client = MlflowClient(tracking_uri=uri)
            exp = client.create_experiment(f"logging-throughput-{int(time.time())}")
            entry = {"uri": uri.split("///")[0] + "///…" if uri.startswith("sqlite") else uri}
            entry["ceiling"] = ceiling(client, exp, batches)
            print(name, "ceiling", entry["ceiling"], flush=True)
            entry["writer"] = writer_flood(client, uri, exp, points, "writer")
            print(name, "writer", entry["writer"], flush=True)
            if name == "sqlite":
                entry["writer_log_batch"] = writer_flood(client, uri, exp, args.log_batch_points,
                                                         "writer-log-batch", bulk=False)
                print(name, "writer through log_batch", entry["writer_log_batch"], flush=True)
                ref_run = client.create_run(exp, run_name="raw-sqlite-reference").info.run_id
                entry["raw_sqlite_reference"] = raw_sqlite_reference(str(work / "mlflow.db"), ref_run, points)
                print(name, "raw sqlite3 reference", entry["raw_sqlite_reference"], flush=True)
            results["stores"][name] = entry
            if name == "sqlite":
                hour_points = args.hour_seconds * RATE_HZ * METRICS
                hour = writer_flood(client, uri, exp, hour_points, "synthetic-hour")
                hour["synthetic_seconds"] = args.hour_seconds
                hour["writer_cpu_pct_of_core_over_hour"] = 100.0 * hour["writer_cpu_s"] / args.hour_seconds
                hour["read_back"] = read_back(client, hour["run_id"], hour_points)
                print("hour", hour, flush=True)
                results["hour"] = hour
                results["paced"] = paced(client, uri, exp, args.paced_seconds)
                print("paced", results["paced"], flush=True)
    finally:
        if server is not None:
            server.stop()

    rows = []
    for name, e in results["stores"].items():
        c, w = e["ceiling"], e["writer"]
        via_log_batch = e.get("writer_log_batch")
        rows.append([name, fmt(c["points_per_s"], 0),
                     fmt(w["points_per_s"], 0) if "writer_log_batch" in e else "–",
                     fmt((via_log_batch or w)["points_per_s"], 0),
                     f"{w['stored']:,}/{w['points']:,}", fmt(w["writer_cpu_s"], 2),
                     fmt(w["writer_cpu_s"] / w["stored"] * 1e6 if w["stored"] else float("nan"), 1),
                     fmt(e["raw_sqlite_reference"]["points_per_s"], 0) if "raw_sqlite_reference" in e else "–"])
    md = ["### Logging throughput (CPU machine)", "",
          table(["store", "log_batch ceiling points/s", "MetricWriter direct insert points/s",
                 "MetricWriter via log_batch points/s", "stored/sent (direct, or log_batch for a server)",
                 "writer CPU s", "writer CPU µs/point",
                 "reference: sqlite3 executemany points/s"], rows), ""]
    if "hour" in results:
        h, r, p = results["hour"], results["hour"]["read_back"], results["paced"]
        md += [f"Synthetic hour into SQLite ({h['synthetic_seconds']} s × {RATE_HZ} Hz × {METRICS} metrics = "
               f"{h['points']:,} points): written in {fmt(h['seconds'], 1)} s ({fmt(h['points_per_s'], 0)} points/s), "
               f"writer {fmt(h['writer_cpu_s'], 1)} CPU s = "
               f"{fmt(h['writer_cpu_pct_of_core_over_hour'], 3)} % of one core over the hour; read back "
               f"{r['points_read']:,} points in {fmt(r['seconds'], 1)} s: "
               f"{'complete, every point as written' if r['complete'] else 'INCOMPLETE'} "
               f"(missing {r['missing']}, unexpected {r['unexpected']}).", "",
               f"Paced in real time ({fmt(p['seconds'], 0)} s at {RATE_HZ} Hz × {METRICS} metrics, flush every 1 s): "
               f"{p['stored']:,}/{p['points']:,} stored, writer {fmt(p['writer_cpu_pct_of_core'], 3)} % of one core.",
               ""]
    write_results(args.out, "logging_throughput", results, "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
