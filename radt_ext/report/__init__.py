"""Plotly HTML reports: a run's timelines, a collocation group, a sweep's trade-offs.

`log_report(client, run_id)` is what the session calls at the end of every run; it
logs `radt_ext_report.html` as an artifact and never raises. Beside the HTML: `tables.py`, the text
tables the commands print (rich on a terminal, plain at full width in a log, CSV/JSON for scripts),
and `settings.py`, which runs repeat one setting (for the statistics over repeats).

May import `radt_ext.figures`, `radt_ext.store` (the run's timeline artifact) and `listeners` (metric
names) only: the run's end calls it.
"""
from __future__ import annotations

import os

ARTIFACT = "radt_ext_report.html"
ENV_DISABLE = "RADT_EXT_REPORT"  # "0" turns the per-run report off


def reports_on() -> bool:
    return os.environ.get(ENV_DISABLE, "1").strip().lower() not in ("0", "false", "no", "off")


def log_report(client, run_id: str, artifact_file: str = ARTIFACT, timelines: dict[str, dict] | None = None,
               children_anywhere: bool = True, childless: bool = False) -> str | None:
    """Build the run's report and log it as an artifact; returns the artifact path, or None
    when reports are off or building one failed (the reason goes to a run tag). `timelines`: {run id: its
    timeline file already read} (a run's or a group's end); the others are read back from the artifact store;
    `children_anywhere`: a run's children looked for beyond its own experiment too; `childless`: the caller
    knows the run has none (not looked for)."""
    if not reports_on():
        return None
    try:
        from radt_ext.report.build import run_html

        client.log_text(run_id, run_html(client, run_id, timelines, children_anywhere, childless), artifact_file)
        return artifact_file
    except Exception as exc:  # a report must never fail the run
        tag_report_error(client, run_id, exc)
        return None


def tag_report_error(client, run_id: str, exc: BaseException, what: str = "") -> None:
    """Why a report (or `what` beside it) was not built: the run's `radt_ext.report_error` tag, the error's first
    line; never raises."""
    try:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        client.set_tag(run_id, "radt_ext.report_error", f"{what}{type(exc).__name__}: {first}"[:4000])
    except Exception:
        pass


def log_sweep_report(client, run_id: str, sweep_id: str, artifact_file: str = "radt_ext_sweep_report.html",
                     runs=None) -> str | None:
    """The sweep's report logged on one run (e.g. the sweep's own parent run); never raises. `runs`: the
    sweep's runs read already (report.data.sweep_runs)."""
    try:
        from radt_ext.report.build import sweep_id_html

        client.log_text(run_id, sweep_id_html(client, sweep_id, runs), artifact_file)
        return artifact_file
    except Exception as exc:
        tag_report_error(client, run_id, exc)
        return None
