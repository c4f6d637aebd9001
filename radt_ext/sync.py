"""`radt-ext sync`: replay spooled metric points into their tracking stores."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import click
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from radt_ext.writer import MAX_BATCH, spool_dir


def replay(path: Path) -> int:
    """Send every point of one spool file; the file is removed only when all were stored."""
    groups: dict[tuple[str, str], list[Metric]] = defaultdict(list)
    with open(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                p = json.loads(line)
                groups[(p["tracking_uri"], p["run_id"])].append(
                    Metric(p["key"], float(p["value"]), int(p["timestamp"]), int(p["step"])))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by a crash mid-write
    sent = 0
    for (uri, run_id), metrics in groups.items():
        client = MlflowClient(tracking_uri=uri)
        for i in range(0, len(metrics), MAX_BATCH):
            client.log_batch(run_id, metrics=metrics[i:i + MAX_BATCH], synchronous=True)
            sent += len(metrics[i:i + MAX_BATCH])
    path.unlink()
    return sent


@click.command()
@click.option("--spool-dir", "directory", type=click.Path(path_type=Path), default=None,
              help="where spool files are (default: RADT_EXT_SPOOL_DIR or ~/.radt-ext/spool)")
def sync(directory):
    """Replay metric points spooled while the tracking store was unreachable."""
    directory = directory or spool_dir()
    files = sorted(directory.glob("*.jsonl")) if directory.is_dir() else []
    if not files:
        click.echo(f"nothing to sync in {directory}")
        return
    total = 0
    for path in files:
        try:
            n = replay(path)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise click.ClickException(f"{path.name}: the store still refuses points ({first}); "
                                       "the spool file is kept, run `radt-ext sync` again later")
        total += n
        click.echo(f"{path.name}: {n} points stored")
    click.echo(f"synced {total} points from {len(files)} file(s)")
