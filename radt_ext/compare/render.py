"""A Comparison as a rich terminal table and as an HTML report."""
from __future__ import annotations

import html as _html

from rich.table import Table

from radt_ext.compare.table import SUMMARY, Comparison
from radt_ext.report.html import document, fmt, table

STYLE = {1: "green", -1: "red", 0: ""}


def _short(metric: str) -> str:
    return metric[len(SUMMARY):] if metric.startswith(SUMMARY) else metric


def cell(comp: Comparison, metric: str, run_id: str) -> str:
    value = comp.value(metric, run_id)
    if value is None:
        return "–"
    if run_id == comp.baseline_id:
        return fmt(value)
    ratio = comp.ratio(metric, run_id)
    return f"{fmt(value)} ({ratio:.2f}×)" if ratio is not None else fmt(value)


def caption(comp: Comparison) -> str:
    return (f"Each metric as a ratio to the baseline {comp.label(comp.runs[0])} ({comp.baseline_id[:8]}, "
            f"chosen by {comp.baseline_how}); green = better, red = worse")


def rich_table(comp: Comparison) -> Table:
    t = Table()
    t.add_column("metric", no_wrap=True)
    for i, run in enumerate(comp.runs):
        t.add_column(("baseline\n" if i == 0 else "") + f"{comp.label(run)}\n{run.info.run_id[:8]}", justify="right")
    for metric in comp.metrics:
        row = [_short(metric)]
        for run in comp.runs:
            text = cell(comp, metric, run.info.run_id)
            style = STYLE[comp.verdict(metric, run.info.run_id)]
            row.append(f"[{style}]{text}[/{style}]" if style else text)
        t.add_row(*row)
    return t


def html_report(comp: Comparison, client=None) -> str:
    """The same table, plus the sweep charts (time vs energy with the Pareto front, per-variant
    bars, slowdown heatmap) for the compared runs."""
    from radt_ext.report import data, figures

    header = ["metric"] + [f"{'baseline: ' if i == 0 else ''}{comp.label(r)} ({r.info.run_id[:8]})"
                           for i, r in enumerate(comp.runs)]
    rows, classes = [], []
    for metric in comp.metrics:
        rows.append([_short(metric)] + [cell(comp, metric, r.info.run_id) for r in comp.runs])
        classes.append([""] + [{1: "better", -1: "worse", 0: ""}[comp.verdict(metric, r.info.run_id)]
                               for r in comp.runs])
    loaded = [data.RunData(run_id=r.info.run_id, name=data.run_name(r), start_s=r.info.start_time / 1000.0,
                           status=r.info.status, tags=dict(r.data.tags), params=dict(r.data.params),
                           metrics=dict(r.data.metrics)) for r in comp.runs]
    note = (f"<p class=note>Baseline {_html.escape(comp.label(comp.runs[0]))} ({comp.baseline_id}), chosen by "
            f"{_html.escape(comp.baseline_how)}. Cells: value (ratio to the baseline); green better, red worse.</p>")
    return document(f"radt-ext compare: {len(comp.runs)} runs", [
        note, table(header, rows, classes), figures.time_energy_scatter(loaded), figures.per_variant_bars(loaded),
        figures.slowdown_heatmap(loaded)])
