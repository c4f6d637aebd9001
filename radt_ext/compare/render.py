"""A Comparison as a rich terminal table, a plain table (a file or a pipe), CSV/JSON records, and an
HTML report."""
from __future__ import annotations

import html as _html

from radt_ext.compare.table import SUMMARY, Comparison
from radt_ext.report.html import document, fmt, table
from radt_ext.report.tables import NOISE_MARK, Column, DataTable, Stat

STYLE = {1: "green", -1: "red", 0: ""}
NOTE = (f"a ± b: the mean of a setting's repeats and its 95 % interval (Student t); {NOISE_MARK}: the difference "
        "from the baseline lies within the noise (the 95 % interval of the difference holds 0)")


def _short(metric: str) -> str:
    return metric[len(SUMMARY):] if metric.startswith(SUMMARY) else metric


def cell(comp: Comparison, metric: str, run_id: str) -> str:
    est = comp.estimate(metric, run_id)
    if est is None:
        return "–"
    text = fmt(est.mean) + (f" ± {fmt(est.half)}" if est.half is not None else "")
    if run_id == comp.baseline_id:
        return text
    ratio = comp.ratio(metric, run_id)
    if ratio is None:
        return text
    return f"{text} ({ratio:.2f}×{' ' + NOISE_MARK if comp.noise(metric, run_id) else ''})"


def header(comp: Comparison, run, i: int, sep: str = "\n") -> str:
    n = comp.repeats(run.info.run_id)
    return (f"baseline{sep}" if i == 0 else "") + f"{comp.label(run)}{sep}{run.info.run_id[:8]}" + \
        (f" (n={n})" if n > 1 else "")


def caption(comp: Comparison) -> str:
    text = (f"Each metric as a ratio to the baseline {comp.label(comp.runs[0])} ({comp.baseline_id[:8]}, "
            f"chosen by {comp.baseline_how}); green = better, red = worse")
    if any(comp.repeats(r.info.run_id) > 1 for r in comp.runs):
        text += f"; {NOTE}"
    return text


def rich_table(comp: Comparison):
    from rich.table import Table

    t = Table()
    t.add_column("metric", no_wrap=True)
    for i, run in enumerate(comp.runs):
        t.add_column(header(comp, run, i), justify="right", overflow="fold")
    for metric in comp.metrics:
        row = [_short(metric)]
        for run in comp.runs:
            text = cell(comp, metric, run.info.run_id)
            style = STYLE[comp.verdict(metric, run.info.run_id)]
            row.append(f"[{style}]{text}[/{style}]" if style else text)
        t.add_row(*row)
    return t


def plain_table(comp: Comparison) -> DataTable:
    """The same table as text, for a file or a pipe: every column whole."""
    t = DataTable("metric", *(header(comp, r, i, " ") for i, r in enumerate(comp.runs)))
    for metric in comp.metrics:
        t.add_row(_short(metric), *(cell(comp, metric, r.info.run_id) for r in comp.runs))
    return t


def records(comp: Comparison) -> DataTable:
    """One row per metric and setting, for scripts (`--output csv|json`)."""
    t = DataTable(Column("metric"), Column("setting"), Column("baseline"), Column("run_ids"),
                  Column("value"), Column("ratio"), Column("verdict"))
    for metric in comp.metrics:
        for run in comp.runs:
            rid = run.info.run_id
            est = comp.estimate(metric, rid)
            verdict = {1: "better", -1: "worse", 0: "same"}[comp.verdict(metric, rid)] if est is not None else None
            t.add_row(_short(metric), comp.label(run), rid == comp.baseline_id,
                      ",".join(r.info.run_id for r in comp.settings[rid]),
                      Stat(est, comp.noise(metric, rid)), comp.ratio(metric, rid), verdict)
    return t


def html_report(comp: Comparison, client=None) -> str:
    """The same table, plus the sweep charts (time vs energy with the Pareto front, per-variant
    bars, slowdown heatmap) for the compared runs."""
    from radt_ext.report import data, figures

    header_row = ["metric"]
    for i, r in enumerate(comp.runs):
        n = comp.repeats(r.info.run_id)
        header_row.append(f"{'baseline: ' if i == 0 else ''}{comp.label(r)} ({r.info.run_id[:8]}"
                          f"{f', n={n}' if n > 1 else ''})")
    rows, classes = [], []
    for metric in comp.metrics:
        rows.append([_short(metric)] + [cell(comp, metric, r.info.run_id) for r in comp.runs])
        classes.append([""] + [{1: "better", -1: "worse", 0: ""}[comp.verdict(metric, r.info.run_id)]
                               for r in comp.runs])
    loaded = [data.RunData(run_id=r.info.run_id, name=data.run_name(r), start_s=r.info.start_time / 1000.0,
                           status=r.info.status, tags=dict(r.data.tags), params=dict(r.data.params),
                           metrics=dict(r.data.metrics)) for g in comp.settings.values() for r in g]
    note = (f"<p class=note>Baseline {_html.escape(comp.label(comp.runs[0]))} ({comp.baseline_id}), chosen by "
            f"{_html.escape(comp.baseline_how)}. Cells: value (ratio to the baseline); green better, red worse"
            + (f"; {_html.escape(NOTE)}" if any(comp.repeats(r.info.run_id) > 1 for r in comp.runs) else "")
            + ".</p>")
    return document(f"radt-ext compare: {len(loaded)} runs", [
        note, table(header_row, rows, classes), figures.time_energy_scatter(loaded), figures.per_variant_bars(loaded),
        figures.slowdown_heatmap(loaded)])
