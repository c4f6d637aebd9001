"""The restore file: what a variant's settings changed, written before each change, so that a watchdog
(radt_ext/run/watchdog.py, `--restore FILE`) puts it back when radt-ext is killed outright, and a later
sweep on the same host does when the watchdog died too.

One JSON file per variant in RADT_EXT_HOSTSETTINGS_DIR (default: a folder of the temporary directory,
which a reboot empties, as it resets what was changed): {"owner": {"pid", "started"}, "settings":
[{"key", "record"}, ...]}. Whoever restores first claims the file by renaming it, so nothing is put
back twice.
"""
from __future__ import annotations

import itertools
import json
import os
import tempfile
from pathlib import Path

import psutil

ENV = "RADT_EXT_HOSTSETTINGS_DIR"
NOTHING = "nothing to restore"  # a setting that changed nothing of the host (the workload's CPUs)
_serial = itertools.count()


def folder() -> Path:
    path = Path(os.environ.get(ENV) or Path(tempfile.gettempdir()) / f"radt-ext-hostsettings-{os.getuid()}")
    path.mkdir(parents=True, exist_ok=True)
    return path


class RestoreFile:
    def __init__(self):
        me = psutil.Process()
        self.path = folder() / f"{me.pid}-{next(_serial)}.json"
        self.data = {"owner": {"pid": me.pid, "started": me.create_time()}, "settings": []}
        self._write()

    def save(self, key: str, record: dict) -> None:
        """What `key` changes, kept before the change (a later save of the same key replaces it)."""
        self.data["settings"] = [s for s in self.data["settings"] if s["key"] != key] + [{"key": key, "record": record}]
        self._write()

    def keep(self, path: str) -> None:
        """A file of the variant's (the launcher's report) that goes when the settings are restored."""
        self.data["files"] = [*self.data.get("files", []), path]
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.path)

    def remove(self) -> None:
        for path in self.data.get("files", []):
            Path(path).unlink(missing_ok=True)
        self.path.unlink(missing_ok=True)


def restore_all(settings: list[dict]) -> dict[str, str]:
    """Each setting put back, the last changed first: {key: what was put back, or why it could not be}."""
    from radt_ext.hostsettings import kind

    said = {}
    for entry in reversed(settings):
        try:
            said[entry["key"]] = kind(entry["key"]).restore(entry["record"]) or NOTHING
        except Exception as exc:
            said[entry["key"]] = f"NOT restored: {type(exc).__name__}: {exc}".splitlines()[0][:500]
    return said


def restore_file(path: str | Path) -> dict[str, str] | None:
    """Claim a restore file and put back what it holds; None when another process claimed it first."""
    path = Path(path)
    claimed = path.with_name(f"{path.name}.claimed-{os.getpid()}")
    try:
        os.rename(path, claimed)
    except FileNotFoundError:
        return None
    try:
        data = json.loads(claimed.read_text())
        for kept in data.get("files", []):
            Path(kept).unlink(missing_ok=True)
        return restore_all(data.get("settings", []))
    finally:
        claimed.unlink(missing_ok=True)


def _alive(owner: dict) -> bool:
    try:
        return psutil.Process(int(owner["pid"])).create_time() == float(owner["started"])
    except (psutil.NoSuchProcess, psutil.ZombieProcess, KeyError, TypeError, ValueError):
        return False
    except psutil.AccessDenied:
        return True


def leftovers() -> list[str]:
    """Restore what killed sweeps on this host left changed (their owner and its watchdog are gone);
    one line per file."""
    lines = []
    for path in sorted(folder().glob("*.json")):
        try:
            owner = json.loads(path.read_text()).get("owner", {})
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        said = restore_file(path)
        if said:
            lines.append(f"host settings left by a killed radt-ext (pid {owner.get('pid')}) restored: "
                         + "; ".join(f"{k}: {v}" for k, v in said.items()))
    return lines
