"""The separate monitor process behind `radt_ext.track()`.

It samples while the parent's work runs and stops when its stdin closes (the
parent finished, or died), then flushes, logs summaries and exits. Sampling
never runs inside the workload's own process.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from listeners.base import Target
from radt_ext.workload_api.progress import read_marks
from radt_ext.sampling.recorder import Recorder, select_listeners
from radt_ext.run.signals import SignalRelay, wait_event
from radt_ext.run.streams import say, tolerate


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--tracking-uri", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--listeners", default=None)
    ap.add_argument("--interval", type=float, default=None)
    ap.add_argument("--progress-file", default=None)
    ap.add_argument("--t0", type=float, default=None)
    ap.add_argument("--full-rate-store", action="store_true", default=None)
    args = ap.parse_args(argv)
    tolerate()  # the parent may stop reading us at any time; the run is flushed all the same

    client = MlflowClient(tracking_uri=args.tracking_uri)
    target = Target(pid=args.pid)
    listeners, skipped = select_listeners(args.listeners, args.interval, target)
    recorder = Recorder(client, args.run_id, args.tracking_uri, listeners, t0=args.t0,
                        full_rate=args.full_rate_store).start()
    done = threading.Event()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    # SIGTERM (a second one too) ends the sampling, never the flush after it
    with SignalRelay(lambda _: done.set(), signals=(signal.SIGTERM,)):
        say(json.dumps({"ready": True, "listeners": [lst.name for lst in listeners], "skipped": skipped}),
            err=False)
        wait_event(done)
        _end(recorder, client, args, listeners, skipped)
    return 0


def _away():
    raise TimeoutError("the store was away at the run's end")


def _end(recorder: Recorder, client: MlflowClient, args, listeners, skipped: dict[str, str]) -> None:
    """Flush the samples, then log the summaries, tags and report; print the summary for the parent."""
    recorder.stop()
    from radt_ext.figures.active import logged_span

    marks = read_marks(args.progress_file)
    now = int(time.time() * 1000)
    summary = recorder.summary(marks, lambda: logged_span(client, [args.run_id]))
    recorder.log_timelines(client, args.run_id,
                           call=lambda fn: recorder.writer.call(fn, 60.0) if not recorder.writer.down else _away())
    tags = recorder.listener_tags()
    tags.update({f"radt_ext.listener_skipped.{k}": v[:4000] for k, v in skipped.items()})
    tags["radt_ext.listeners"] = ",".join(f"{lst.name}:{lst.interval:g}" for lst in listeners)
    metrics = [Metric(f"summary/{k}", float(v), now, 0) for k, v in summary.items()]
    # spooled for `radt-ext sync` when the store is away; the workload's own run sets the status
    if recorder.writer.end_run(metrics, tags, None):
        from radt_ext.report import log_report

        log_report(client, args.run_id)  # never raises: a failed report is a run tag
        from radt_ext.view import refresh_quietly

        with contextlib.suppress(Exception):  # the comparison view of the run's experiment; never fails it
            refresh_quietly(client, client.get_run(args.run_id).info.experiment_id)
    say(json.dumps({"summary": summary}), err=False)  # nobody may be reading any more: then it is dropped


if __name__ == "__main__":
    sys.exit(main())
