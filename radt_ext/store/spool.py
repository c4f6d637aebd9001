"""The spool directory's layout, as `radt-ext sync` reads and keeps it:

    <spool>/<run id>.jsonl          points, tags, status (and a run still to make) whose store did not take them
    <spool>/<name>.jsonl.replaying  a file a sync was replaying when it was cut off
    <spool>/timelines/<run id>/     a run's timeline file its end could not store, and target.json (where it goes)
    <spool>/waiting.json            why each entry the last sync kept still waits, and when it tried
    <spool>/gone/                   entries whose store is gone, set aside by sync as they were, each with
                                    <name>.why beside it (a JSON line each: store, run, why, when)
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

REPLAYING = ".replaying"
TIMELINES = "timelines"
TARGET = "target.json"  # in a timeline folder: {tracking_uri, run_id, error}
WAITING = "waiting.json"
GONE = "gone"
WHY = ".why"


def spool_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    plain = set(directory.glob("*.jsonl"))
    # X.jsonl.replaying is replayed along with X.jsonl when both are there
    left = {p for p in directory.glob(f"*.jsonl{REPLAYING}") if p.with_name(p.name[: -len(REPLAYING)]) not in plain}
    return sorted(plain | left)


def timeline_dirs(directory: Path) -> list[Path]:
    """Timeline files a run's end could not store, each in a folder with its target."""
    return sorted(p.parent for p in (directory / TIMELINES).glob(f"*/{TARGET}"))


def entry_name(directory: Path, path: Path) -> str:
    """How an entry is named to users and in waiting.json: `<run id>.jsonl`, `timelines/<run id>`."""
    name = str(path.relative_to(directory))
    return name[: -len(REPLAYING)] if name.endswith(REPLAYING) else name


def read_waiting(directory: Path) -> dict[str, dict]:
    """{entry name: {"why", "at" (s since the epoch)}} as the last sync left it; {} when none or unreadable."""
    try:
        records = json.loads((directory / WAITING).read_text())
    except (OSError, ValueError):
        return {}
    return records if isinstance(records, dict) else {}


def write_waiting(directory: Path, records: dict[str, dict]) -> None:
    path = directory / WAITING
    if not records:
        path.unlink(missing_ok=True)
        return
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(records, indent=1, sort_keys=True))
    os.replace(part, path)


def set_aside(directory: Path, path: Path, name: str, notes: list[dict]) -> Path:
    """Move an entry (a spool file or a timeline folder) to gone/<name>, noting why in gone/<name>.why;
    a file of that name there already gets these lines appended. Where it went."""
    dest = directory / GONE / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        dest.mkdir(exist_ok=True)
        for item in path.iterdir():
            os.replace(item, dest / item.name)
        path.rmdir()
    elif dest.exists():
        with open(path) as src, open(dest, "a") as dst:
            shutil.copyfileobj(src, dst)
        path.unlink()
    else:
        os.replace(path, dest)
    at = time.time()
    with open(dest.with_name(dest.name + WHY), "a") as fh:
        for note in notes:
            fh.write(json.dumps({**note, "at": at}) + "\n")
    return dest


def gone_entries(directory: Path) -> list[tuple[Path, list[dict]]]:
    """What sync set aside: (the entry in gone/, its notes)."""
    root = directory / GONE
    found = []
    for why in sorted(root.rglob(f"*{WHY}")) if root.is_dir() else []:
        entry = why.with_name(why.name[: -len(WHY)])
        notes = []
        for line in why.read_text(errors="replace").splitlines():
            try:
                notes.append(json.loads(line))
            except ValueError:
                continue
        found.append((entry, notes))
    return found
