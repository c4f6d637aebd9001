"""radt-ext's view written into an experiment, kept current, and the link that opens it.

`refresh` is cheap and idempotent: one read of the experiment, and a write only when the view is
missing, unreadable or lacks a sweep parameter (parameters are only ever added, so two processes
refreshing at once cannot take one away from each other for long: the next refresh puts it back).
"""
from __future__ import annotations

import logging
import time

from radt_ext.view import content
from radt_ext.view import mlflow_format as fmt

log = logging.getLogger(__name__)

LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves a local store by default
TAG = fmt.TAG_PREFIX + content.KEY


def refresh(client, experiment_id: str, params=()) -> bool:
    """Write (or bring up to date) radt-ext's view in the experiment; True when the tag was written."""
    experiment = client.get_experiment(experiment_id)
    old = experiment.tags.get(TAG)
    created = None
    wanted = set(params)
    if old is not None:
        try:
            _, created, state = fmt.decode(old)
            wanted |= set(content.params_of(state))
            if state == _shared(content.state(sorted(wanted))):
                return False
        except ValueError:
            pass  # not ours any more (or damaged): written afresh
    now = int(time.time() * 1000)
    value = fmt.encode(content.NAME, content.state(sorted(wanted)), created or now, now)
    client.set_experiment_tag(experiment_id, TAG, value)
    return True


def refresh_quietly(client, experiment_id: str | None, params=()) -> None:
    """refresh(), whose failure never fails a run: one line in the log instead."""
    if client is None or experiment_id is None:
        return
    try:
        refresh(client, experiment_id, params)
    except Exception as exc:
        log.warning("radt-ext: the comparison view of experiment %s was not updated (%s)", experiment_id,
                    str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__)


def _shared(state: dict) -> dict:
    return {k: v for k, v in state.items() if k not in fmt.NOT_SHARED}


def base_url(tracking_uri: str) -> str:
    """The UI's address for a store: the tracking server's own, else where `mlflow ui` serves a local one."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/")
    return LOCAL_UI


def link(tracking_uri: str, experiment_id: str, ui_url: str | None = None) -> str:
    return fmt.link(ui_url or base_url(tracking_uri), experiment_id, content.KEY)


def link_line(tracking_uri: str, experiment_id: str, ui_url: str | None = None) -> str:
    """What the commands print when they are done."""
    where = "" if tracking_uri.startswith(("http://", "https://")) or ui_url else " (after `radt-ext ui`)"
    return f"radt-ext: comparison view{where}: {link(tracking_uri, experiment_id, ui_url)}"


def version_note(version: str) -> str | None:
    """One line when the MLflow here is not a version the view's format was checked against."""
    if fmt.tested(version):
        return None
    return (f"radt-ext: MLflow {version}'s UI is untested with the comparison view (tested: "
            f"{', '.join(fmt.TESTED_MLFLOW_VERSIONS)}); if the link opens the default page, use the Views list "
            "or docs/comparison.md")
