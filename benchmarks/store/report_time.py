"""How long a recorded run's HTML report takes to build: the report radt-ext draws at every run's end.

    python -m benchmarks.store.report_time --store sqlite:///RESULTS/mlflow.db --timelines RESULTS/system.parquet \
        --out docs/benchmarks/gpu/store_growth

Input: a run recorded by benchmarks/store/store_growth.sh (its store and its timeline artifact). The store is
copied, its run pointed at a folder holding the artifact, and `radt_ext.report.log_report` timed on it.
"""
from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from benchmarks.common import fmt, table, write_results
from radt_ext.store.timelines import ARTIFACT_DIR, SYSTEM_FILE


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="the run's store (sqlite:///…)")
    parser.add_argument("--timelines", required=True, help="the run's timelines/system.parquet")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from mlflow.tracking import MlflowClient

    from radt_ext.report import ARTIFACT, log_report

    with tempfile.TemporaryDirectory(prefix="radt-report-time-") as tmp:
        db = Path(tmp) / "mlflow.db"
        shutil.copy(args.store[len("sqlite:///"):], db)
        artifacts = Path(tmp) / "artifacts"
        (artifacts / ARTIFACT_DIR).mkdir(parents=True)
        shutil.copy(args.timelines, artifacts / ARTIFACT_DIR / SYSTEM_FILE)
        with sqlite3.connect(db) as conn:  # the run's artifacts where this machine has them
            run_id, = conn.execute("SELECT run_uuid FROM metrics GROUP BY run_uuid ORDER BY COUNT(*) DESC LIMIT 1"
                                   ).fetchone()
            conn.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (str(artifacts), run_id))
            epochs = conn.execute("SELECT COUNT(DISTINCT step) FROM metrics WHERE run_uuid = ? AND key NOT LIKE"
                                  " 'system/%' AND key NOT LIKE 'summary/%'", (run_id,)).fetchone()[0]
        client = MlflowClient(f"sqlite:///{db}")
        start = time.perf_counter()
        logged = log_report(client, run_id)
        seconds = time.perf_counter() - start
        error = client.get_run(run_id).data.tags.get("radt_ext.report_error")
        size = (artifacts / ARTIFACT).stat().st_size if logged else 0
    result = {"run_id": run_id, "workload_steps": epochs, "report_s": seconds, "report_bytes": size, "error": error}
    lines = ["### The run's report", "",
             table(["run", "workload steps (epochs)", "report built in (s)", "report size (KB)", "error"],
                   [[run_id[:8], epochs, fmt(seconds), fmt(size / 1000, 0), error or "none"]])]
    write_results(args.out, "report_time", result, "\n".join(lines))


if __name__ == "__main__":
    main()
