"""`radt-ext sync --list`: every entry that waits in the spool (its store, run, size, age and why it waits)
and what sync set aside as gone. Read from the spool alone: no store is contacted."""
from __future__ import annotations

import json
import time
from pathlib import Path

from radt_ext.store.spool import (GONE, TARGET, entry_name, gone_entries, read_waiting, spool_files,
                                  timeline_dirs)

NOT_TRIED = "not tried yet"


def show_spool(directory: Path) -> None:
    from rich.console import Console

    console = Console()
    now = time.time()
    waiting = read_waiting(directory)
    rows = [_file_row(directory, path, waiting, now) for path in spool_files(directory)]
    rows += [_timeline_row(directory, folder, waiting, now) for folder in timeline_dirs(directory)]
    if rows:
        table = _table(f"waiting in {directory} for `radt-ext sync`", "entry", "store", "run", "size", "age",
                       "why it waits")
        for row in rows:
            table.add_row(*row)
        console.print(table)
    else:
        console.print(f"nothing waits in {directory}", highlight=False)
    gone = gone_entries(directory)
    if gone:
        table = _table(f"set aside in {directory / GONE}: their store is gone (move one back into {directory} "
                       "to try it again)", "entry", "store", "run", "size", "set aside", "why")
        for entry, notes in gone:
            at = max((n.get("at", 0) for n in notes), default=None)
            table.add_row(str(entry.relative_to(directory / GONE)), _lines(n.get("store") for n in notes),
                          _lines(n.get("run") for n in notes), _size(entry),
                          _age(now - at) + " ago" if at else "?", _lines(n.get("why") for n in notes))
        console.print(table)


def _table(title: str, *columns: str):
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")  # a path or run id whole, over several lines if need be
    return table


def _file_row(directory: Path, path: Path, waiting: dict, now: float) -> tuple[str, ...]:
    stores, runs = _targets(path)
    return (entry_name(directory, path), _lines(stores), _lines(runs), _size(path),
            _age(now - path.stat().st_mtime), _why(waiting.get(entry_name(directory, path)), now))


def _timeline_row(directory: Path, folder: Path, waiting: dict, now: float) -> tuple[str, ...]:
    try:
        target = json.loads((folder / TARGET).read_text())
    except (OSError, ValueError):
        target = {}
    why = _why(waiting.get(entry_name(directory, folder)), now)
    if why == NOT_TRIED and target.get("error"):
        why = f"{NOT_TRIED}; the run's end: {target['error']}"
    return (entry_name(directory, folder), str(target.get("tracking_uri", "?")), str(target.get("run_id", "?")),
            _size(folder), _age(now - (folder / TARGET).stat().st_mtime), why)


def _targets(path: Path) -> tuple[list[str], list[str]]:
    """The stores and runs a spool file's lines name (a run still to be made: the experiment it goes in)."""
    stores: dict[str, None] = {}
    runs: dict[str, str] = {}  # run id: how it is shown
    with open(path, errors="replace") as fh:
        for line in fh:
            try:
                record = json.loads(line)
                stores[str(record["tracking_uri"])] = None
                run = str(record["run_id"])
            except (ValueError, KeyError, TypeError):
                continue
            if record.get("kind") == "run":
                runs[run] = f"{run} (to be made in experiment {record.get('experiment_id') or '0'})"
            else:
                runs.setdefault(run, run)
    return list(stores), list(runs.values())


def _why(record: dict | None, now: float) -> str:
    if not record:
        return NOT_TRIED
    return f"{record.get('why', '?')} (tried {_age(now - float(record.get('at', now)))} ago)"


def _lines(values) -> str:
    return "\n".join(dict.fromkeys(str(v) for v in values if v)) or "?"


def _size(path: Path) -> str:
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    size = sum(p.stat().st_size for p in files)
    if size < 1024:
        return f"{size} B"
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            return f"{size:.1f} {unit}"


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
