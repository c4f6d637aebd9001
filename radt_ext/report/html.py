"""One self-contained HTML document holding several plotly figures and small tables.

plotly.js is embedded once (about 4.8 MB) so the report opens offline and inside
MLflow's artifact viewer, which shows HTML in a sandboxed frame where no relative
or remote script would load.
"""
from __future__ import annotations

import html
import math

import plotly.io as pio

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em 0;font-size:0.9em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3}.better{color:#080}.worse{color:#b00}.note{color:#666;font-size:0.85em}
"""


def fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(header: list[str], rows: list[list], classes: list[list[str]] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>"]
    for r, row in enumerate(rows):
        cells = []
        for c, cell in enumerate(row):
            cls = classes[r][c] if classes and classes[r][c] else ""
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{html.escape(fmt(cell))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "</table>"


def document(title: str, parts: list) -> str:
    """parts: HTML strings and plotly figures (None entries are skipped), in order."""
    body, js_done = [], False
    for part in parts:
        if part is None:
            continue
        if isinstance(part, str):
            body.append(part)
            continue
        body.append(pio.to_html(part, full_html=False, include_plotlyjs=not js_done,
                                config={"displaylogo": False, "responsive": True}))
        js_done = True
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>\n" + "\n".join(body) +
            "\n</body></html>")
